//! The parsed form of a step, which the runner makes once at load and keeps with the
//! migration.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// What the runner made of a step's text for the database it runs on, where sending it takes
/// more than the SQL tokenizer's split (a MySQL `DELIMITER` script's statements, a JSON
/// command file's documents): made once, when the migrations are loaded and checked, and
/// kept with the migration, so that running the step (on every target of a fleet) does not
/// parse it again. Opaque here: its type is the runner's. Shared between clones.
#[derive(Clone, Default)]
pub struct ParsedStep(Option<Arc<dyn Any + Send + Sync>>);

impl ParsedStep {
    /// `parsed`, kept for the step.
    pub fn new<T: Any + Send + Sync>(parsed: T) -> Self {
        ParsedStep(Some(Arc::new(parsed)))
    }

    /// The parsed form, if the step has one of type `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref()?.downcast_ref()
    }
}

/// A function of the step's text and its database, which `Migration`'s equality already
/// compares: it never makes two migrations unequal.
impl PartialEq for ParsedStep {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ParsedStep {}

impl fmt::Debug for ParsedStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Some(_) => "ParsedStep(..)",
            None => "ParsedStep(None)",
        })
    }
}

/// The parsed form of each step of a migration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ParsedSteps {
    pub(super) up: ParsedStep,
    pub(super) down: ParsedStep,
}
