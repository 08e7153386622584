//! What a migration is: version, name, steps, checksum, and where it runs. Defined in
//! [`dirthara_source`], so that `embed_migrations!` applies the same rules at compile time.

pub use dirthara_source::migration::*;
