//! How an error is printed for people: its own message, then each source's,
//! `: `-separated. Our error types print their own words only and keep the
//! cause as their `source()`, so a cause is said once; logs, the terminal
//! and problem details print the chain with [`Chain`].

use std::error::Error;
use std::fmt;

/// Displays an error and every source below it: `outer: middle: inner`.
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_chain_says_each_cause_once() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(Chain(&e).to_string(), "outer: inner");
    }
}
