//! What the library's tests, the CLI's tests and the benches share, so that each server is
//! described once: [`servers::Server`] (which test server, and what it can do) and
//! [`servers::TestDb`] (a throwaway database on it), and the fuzz targets' runner
//! ([`fuzz::fuzz`], each input held to time and memory bounds). A dev-dependency only, never
//! published.
//!
//! Adding a server to the tests is a variant of [`servers::Server`] (its URL variable, how
//! to create and drop a database, its SQL for a sleep and for its tables); the tables of
//! the conformance checks and the lock scenarios then take it as one row each.

pub mod fuzz;
pub mod servers;
