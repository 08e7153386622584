//! Hosted poolers recognised by the shape of the URL, so that a refused session lock names
//! the service and the connection that works there. Each service documents these shapes:
//! Neon's pooled endpoints carry `-pooler` in the first label of the host name; Supabase's
//! Supavisor pools transactions on port 6543 (session mode on 5432 of the same host); RDS
//! Proxy endpoints are `NAME.proxy-ID.REGION.rds.amazonaws.com`.

/// Advice for the hosted pooler at `host:port`, if the URL shows one.
pub(super) fn hosted_pooler_advice(host: &str, port: u16) -> Option<String> {
    let host = host.to_ascii_lowercase();
    let first_label = host.split('.').next().unwrap_or_default();
    if host.ends_with(".neon.tech") && first_label.ends_with("-pooler") {
        let direct = host.replacen("-pooler", "", 1);
        return Some(format!(
            "`{host}` is Neon's pooled endpoint (PgBouncer in transaction mode); Neon's direct \
             endpoint is the same host without `-pooler`: `{direct}`"
        ));
    }
    if host.ends_with(".pooler.supabase.com") || (port == 6543 && host.contains("supabase")) {
        return Some(format!(
            "`{host}:{port}` looks like Supabase's pooler (Supavisor); its transaction mode, \
             port 6543, cannot hold a session lock: use its session mode (port 5432 on the same \
             host) or the direct connection `db.<project>.supabase.co:5432`"
        ));
    }
    if port == 6543 {
        return Some(
            "port 6543 is where Supabase's Supavisor pools transactions; if this is Supabase, \
             use port 5432 (session mode) or the direct connection"
                .to_string(),
        );
    }
    if host.ends_with(".rds.amazonaws.com")
        && host
            .split('.')
            .nth(1)
            .is_some_and(|l| l.starts_with("proxy-"))
    {
        return Some(format!(
            "`{host}` is an RDS Proxy endpoint. RDS Proxy is documented to pin a client to one \
             server session once it takes an advisory lock, but here the check saw two \
             sessions; connect to the instance or cluster endpoint instead"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::hosted_pooler_advice;

    #[test]
    fn neon_pooled_endpoints_name_the_direct_one() {
        let advice = hosted_pooler_advice(
            "ep-cool-darkness-123456-pooler.us-east-2.aws.neon.tech",
            5432,
        )
        .unwrap();
        assert!(advice.contains("Neon's pooled endpoint"), "{advice}");
        assert!(
            advice.contains("`ep-cool-darkness-123456.us-east-2.aws.neon.tech`"),
            "{advice}"
        );
        // Neon's direct endpoint is no pooler.
        assert_eq!(
            hosted_pooler_advice("ep-cool-darkness-123456.us-east-2.aws.neon.tech", 5432),
            None
        );
    }

    #[test]
    fn supabase_transaction_mode_is_port_6543() {
        let advice = hosted_pooler_advice("aws-0-eu-central-1.pooler.supabase.com", 6543).unwrap();
        assert!(advice.contains("Supavisor"), "{advice}");
        assert!(advice.contains("port 5432"), "{advice}");
        let advice = hosted_pooler_advice("db.example.internal", 6543).unwrap();
        assert!(advice.contains("if this is Supabase"), "{advice}");
    }

    #[test]
    fn rds_proxy_endpoints_are_told_to_connect_to_the_instance() {
        let advice = hosted_pooler_advice(
            "app-proxy.proxy-abcdefghijkl.us-east-1.rds.amazonaws.com",
            5432,
        )
        .unwrap();
        assert!(advice.contains("RDS Proxy endpoint"), "{advice}");
        // An instance or cluster endpoint is not a proxy.
        assert_eq!(
            hosted_pooler_advice("db1.abcdefghijkl.us-east-1.rds.amazonaws.com", 5432),
            None
        );
        assert_eq!(hosted_pooler_advice("127.0.0.1", 6432), None);
    }
}
