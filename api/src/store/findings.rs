//! Findings of scans.
