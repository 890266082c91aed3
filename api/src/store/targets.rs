//! Targets: the domains a user scans.
