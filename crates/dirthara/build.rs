//! Short names for the feature lists that `#[cfg]`s repeat:
//!
//! - `sql`: a SQL backend is built (`sqlite`, `postgres` or `mysql`), so sqlx is in use;
//! - `any_backend`: any backend is built (a SQL one or `mongodb`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(sql)");
    println!("cargo::rustc-check-cfg=cfg(any_backend)");
    let enabled = |feature: &str| std::env::var_os(format!("CARGO_FEATURE_{feature}")).is_some();
    let sql = ["SQLITE", "POSTGRES", "MYSQL"].into_iter().any(enabled);
    if sql {
        println!("cargo::rustc-cfg=sql");
    }
    if sql || enabled("MONGODB") {
        println!("cargo::rustc-cfg=any_backend");
    }
}
