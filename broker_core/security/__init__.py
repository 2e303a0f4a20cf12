"""Security: who a connection is (principals), how it proved it (TLS, SASL), what it may do (ACLs)."""
