//! JSON diff by JSON pointer (RFC 6901): objects key by key (in key
//! order), arrays index by index, anything else whole.
//!
//! Arrays are compared by position: an element inserted at the front shows
//! as every later index changed plus one added at the end. Arguments and
//! settings are small and mostly objects, where that reads well; the list
//! is bounded by [`MAX_JSON_CHANGES`] and each value in it is cut (see
//! [`super::cut_value`]), so a megabyte script compared with another stays
//! a short answer. Values nested deeper than [`MAX_DEPTH`] are compared
//! whole at that depth.

use serde_json::Value;

use crate::model::{JsonChange, JsonOp};

/// Changes listed per compared pair of values, at most (the first ones in
/// document order).
pub const MAX_JSON_CHANGES: usize = 100;
/// Nesting followed into objects and arrays.
pub const MAX_DEPTH: usize = 64;

/// The changes from `a` to `b` (empty when they are equal).
pub fn json_diff(a: &Value, b: &Value) -> Vec<JsonChange> {
    let mut out = Vec::new();
    walk(a, b, &mut String::new(), 0, &mut out);
    out
}

fn walk(a: &Value, b: &Value, path: &mut String, depth: usize, out: &mut Vec<JsonChange>) {
    if out.len() >= MAX_JSON_CHANGES || a == b {
        return;
    }
    let len = path.len();
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if depth < MAX_DEPTH => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))).collect();
            keys.sort();
            for key in keys {
                push_token(path, key);
                match (x.get(key), y.get(key)) {
                    (Some(va), Some(vb)) => walk(va, vb, path, depth + 1, out),
                    (va, vb) => change(out, path, va, vb),
                }
                path.truncate(len);
            }
        }
        (Value::Array(x), Value::Array(y)) if depth < MAX_DEPTH => {
            for i in 0..x.len().max(y.len()) {
                path.push('/');
                path.push_str(&i.to_string());
                match (x.get(i), y.get(i)) {
                    (Some(va), Some(vb)) => walk(va, vb, path, depth + 1, out),
                    (va, vb) => change(out, path, va, vb),
                }
                path.truncate(len);
                if out.len() >= MAX_JSON_CHANGES {
                    return;
                }
            }
        }
        _ => change(out, path, Some(a), Some(b)),
    }
}

/// Appends `/key` to a pointer, escaped (`~` as `~0`, `/` as `~1`).
fn push_token(path: &mut String, key: &str) {
    path.push('/');
    for c in key.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

fn change(out: &mut Vec<JsonChange>, path: &str, a: Option<&Value>, b: Option<&Value>) {
    if out.len() >= MAX_JSON_CHANGES {
        return;
    }
    let op = match (a, b) {
        (None, _) => JsonOp::Added,
        (_, None) => JsonOp::Removed,
        _ => JsonOp::Changed,
    };
    out.push(JsonChange { path: path.to_owned(), op, a: a.map(super::cut_value), b: b.map(super::cut_value) });
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// The pointer's tokens, unescaped.
    fn tokens(path: &str) -> Vec<String> {
        path.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect()
    }

    /// Applies the changes to `a` (removals last, from the end).
    fn apply(mut a: Value, changes: &[JsonChange]) -> Value {
        let (removed, rest): (Vec<&JsonChange>, Vec<&JsonChange>) =
            changes.iter().partition(|c| c.op == JsonOp::Removed);
        for c in rest.into_iter().chain(removed.into_iter().rev()) {
            let tokens = tokens(&c.path);
            let Some((last, parents)) = tokens.split_last() else {
                a = c.b.clone().unwrap();
                continue;
            };
            let mut at = &mut a;
            for t in parents {
                at = match at {
                    Value::Object(m) => m.get_mut(t).unwrap(),
                    Value::Array(v) => &mut v[t.parse::<usize>().unwrap()],
                    _ => unreachable!(),
                };
            }
            match (at, c.op) {
                (Value::Object(m), JsonOp::Removed) => drop(m.remove(last)),
                (Value::Object(m), _) => drop(m.insert(last.clone(), c.b.clone().unwrap())),
                (Value::Array(v), JsonOp::Removed) => drop(v.remove(last.parse::<usize>().unwrap())),
                (Value::Array(v), JsonOp::Added) => v.push(c.b.clone().unwrap()),
                (Value::Array(v), _) => v[last.parse::<usize>().unwrap()] = c.b.clone().unwrap(),
                _ => unreachable!(),
            }
        }
        a
    }

    #[test]
    fn changes_are_listed_by_pointer() {
        let a = json!({"expression": "2 + 2", "keep": 1, "gone": true, "a/b~": [1, 2, 3]});
        let b = json!({"expression": "3 + 3", "keep": 1, "new": null, "a/b~": [1, 5]});
        let changes = json_diff(&a, &b);
        let brief: Vec<(&str, JsonOp)> = changes.iter().map(|c| (c.path.as_str(), c.op)).collect();
        assert_eq!(
            brief,
            [
                ("/a~1b~0/1", JsonOp::Changed),
                ("/a~1b~0/2", JsonOp::Removed),
                ("/expression", JsonOp::Changed),
                ("/gone", JsonOp::Removed),
                ("/new", JsonOp::Added),
            ]
        );
        assert_eq!((changes[2].a.clone(), changes[2].b.clone()), (Some(json!("2 + 2")), Some(json!("3 + 3"))));
        assert_eq!(json_diff(&json!(1), &json!("1"))[0].path, "");
        let many: Vec<i32> = (0..1000).collect();
        assert_eq!(json_diff(&json!([]), &json!(many)).len(), MAX_JSON_CHANGES);
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0i64..5).prop_map(Value::from),
            "[a-c/~]{0,3}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-c/~]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn a_value_against_itself_has_no_changes_and_changes_lead_from_a_to_b(a in value(), b in value()) {
            prop_assert!(json_diff(&a, &a).is_empty());
            let changes = json_diff(&a, &b);
            prop_assert_eq!(changes.is_empty(), a == b);
            prop_assert_eq!(apply(a, &changes), b);
        }
    }
}
