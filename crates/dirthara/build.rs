//! Short names for the feature lists that `#[cfg]`s repeat:
//!
//! - `sql`: a SQL backend is built (`sqlite`, `postgres` or `mysql`), so sqlx is in use;
//! - `any_backend`: any backend is built (a SQL one or `mongodb`);
//! - `every_backend`: all four are built (the CLI's default).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(sql)");
    println!("cargo::rustc-check-cfg=cfg(any_backend)");
    println!("cargo::rustc-check-cfg=cfg(every_backend)");
    let enabled = |feature: &str| std::env::var_os(format!("CARGO_FEATURE_{feature}")).is_some();
    let sql = ["SQLITE", "POSTGRES", "MYSQL"].into_iter().any(enabled);
    if sql {
        println!("cargo::rustc-cfg=sql");
    }
    if sql || enabled("MONGODB") {
        println!("cargo::rustc-cfg=any_backend");
    }
    if ["SQLITE", "POSTGRES", "MYSQL", "MONGODB"]
        .into_iter()
        .all(enabled)
    {
        println!("cargo::rustc-cfg=every_backend");
    }
}
