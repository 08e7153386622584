// Recompile when a migration is added to the directory (edits are tracked by the macro).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
