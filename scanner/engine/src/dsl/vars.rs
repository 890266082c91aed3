//! Where expressions look their variables up.

use std::collections::HashMap;

use super::value::Value;

/// A read-only scope of named values.
///
/// `get` returns an owned `Value`; string values share their buffer
/// (`Bytes`), so returning a large body is a reference-count bump, not a copy.
pub trait Vars {
    fn get(&self, name: &str) -> Option<Value>;

    /// Whether `name` is defined. Override when a lookup is expensive.
    fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

impl<S: std::hash::BuildHasher> Vars for HashMap<String, Value, S> {
    fn get(&self, name: &str) -> Option<Value> {
        HashMap::get(self, name).cloned()
    }
    fn contains(&self, name: &str) -> bool {
        self.contains_key(name)
    }
}

impl Vars for HashMap<&str, Value> {
    fn get(&self, name: &str) -> Option<Value> {
        HashMap::get(self, name).cloned()
    }
    fn contains(&self, name: &str) -> bool {
        self.contains_key(name)
    }
}

/// The empty scope.
pub struct NoVars;

impl Vars for NoVars {
    fn get(&self, _name: &str) -> Option<Value> {
        None
    }
}

/// Two scopes looked up in order: the first one that defines a name wins.
pub struct Chain<'a>(pub &'a dyn Vars, pub &'a dyn Vars);

impl Vars for Chain<'_> {
    fn get(&self, name: &str) -> Option<Value> {
        self.0.get(name).or_else(|| self.1.get(name))
    }
    fn contains(&self, name: &str) -> bool {
        self.0.contains(name) || self.1.contains(name)
    }
}

/// Any number of scopes looked up in order: the first one that defines a
/// name wins.
pub struct Layers<'a>(pub Vec<&'a dyn Vars>);

impl Vars for Layers<'_> {
    fn get(&self, name: &str) -> Option<Value> {
        self.0.iter().find_map(|v| v.get(name))
    }
    fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|v| v.contains(name))
    }
}

/// A scope backed by a closure, handy for computed variables.
pub struct FnVars<F>(pub F);

impl<F: Fn(&str) -> Option<Value>> Vars for FnVars<F> {
    fn get(&self, name: &str) -> Option<Value> {
        (self.0)(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_prefers_the_first_scope() {
        let mut a: HashMap<String, Value> = HashMap::new();
        a.insert("x".into(), Value::from("first"));
        let mut b: HashMap<String, Value> = HashMap::new();
        b.insert("x".into(), Value::from("second"));
        b.insert("y".into(), Value::from("only-second"));
        let chain = Chain(&a, &b);
        assert_eq!(chain.get("x"), Some(Value::from("first")));
        assert_eq!(chain.get("y"), Some(Value::from("only-second")));
        assert_eq!(chain.get("z"), None);
    }
}
