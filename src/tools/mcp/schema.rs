//! Whether a tool's `inputSchema` is one a provider accepts: an object schema (`"type": "object"`) whose
//! `type` values, `properties`, `required` and nested schemas have JSON Schema's shapes. One tool with a broken
//! schema made a validating provider reject every request of the session (issue 23, finding 8), so such a
//! tool is not offered, and the user is told which one and why.

use serde_json::Value;

/// The type names JSON Schema knows.
const TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];
/// Nesting deeper than this is refused rather than walked (a schema is data from the server).
const MAX_DEPTH: usize = 32;

/// What is wrong with `schema` as a tool's input schema, if anything.
pub fn problem(schema: &Value) -> Option<String> {
    let Value::Object(map) = schema else {
        return Some("it is not a JSON object".into());
    };
    match map.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => return Some(format!("its type is {other}, not \"object\"")),
        None => return Some("it has no \"type\": \"object\"".into()),
    }
    subschema(schema, "", 0)
}

/// The first problem of a (sub)schema at `at` (a JSON pointer for the message).
fn subschema(schema: &Value, at: &str, depth: usize) -> Option<String> {
    let map = match schema {
        // `true` and `false` are schemas too.
        Value::Bool(_) => return None,
        Value::Object(map) => map,
        _ => return Some(format!("{} is not a schema", shown(at))),
    };
    if depth > MAX_DEPTH {
        return Some(format!("it nests deeper than {MAX_DEPTH} levels"));
    }
    if let Some(kind) = map.get("type") {
        if !valid_type(kind) {
            return Some(format!("{}/type is {kind}, not a JSON Schema type", at));
        }
    }
    if let Some(required) = map.get("required") {
        let names = required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string));
        if !names {
            return Some(format!("{at}/required is not a list of names"));
        }
    }
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        match map.get(key) {
            None => {}
            Some(Value::Object(children)) => {
                for (name, child) in children {
                    let path = format!("{at}/{key}/{name}");
                    if let Some(problem) = subschema(child, &path, depth + 1) {
                        return Some(problem);
                    }
                }
            }
            Some(_) => return Some(format!("{at}/{key} is not an object")),
        }
    }
    for key in ["items", "additionalProperties", "not", "contains"] {
        if let Some(child) = map.get(key) {
            // `items` may still be a list of schemas (draft 4 to 2019-09 tuples).
            let children = child
                .as_array()
                .map_or_else(|| vec![child], |a| a.iter().collect());
            for child in children {
                if let Some(problem) = subschema(child, &format!("{at}/{key}"), depth + 1) {
                    return Some(problem);
                }
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        match map.get(key) {
            None => {}
            Some(Value::Array(children)) => {
                for (i, child) in children.iter().enumerate() {
                    let path = format!("{at}/{key}/{i}");
                    if let Some(problem) = subschema(child, &path, depth + 1) {
                        return Some(problem);
                    }
                }
            }
            Some(_) => return Some(format!("{at}/{key} is not a list")),
        }
    }
    None
}

fn valid_type(kind: &Value) -> bool {
    let known = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
    match kind {
        Value::Array(kinds) => !kinds.is_empty() && kinds.iter().all(known),
        one => known(one),
    }
}

fn shown(at: &str) -> &str {
    if at.is_empty() {
        "the schema"
    } else {
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_schemas_pass() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "depth": {"type": ["integer", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "mode": {"anyOf": [{"const": "a"}, {"type": "boolean"}]},
            "any": true
        }, "required": ["path"], "additionalProperties": false});
        assert_eq!(problem(&schema), None);
    }

    #[test]
    fn broken_schemas_are_named() {
        let cases = [
            (json!({"type": "array"}), "not \"object\""),
            (json!({"properties": {}}), "no \"type\""),
            (
                json!({"type": "object", "properties": []}),
                "/properties is not an object",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "text"}}}),
                "/properties/a/type",
            ),
            (
                json!({"type": "object", "properties": {"a": 3}}),
                "/properties/a is not a schema",
            ),
            (json!({"type": "object", "required": "a"}), "/required"),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": 1}}}}),
                "items/type",
            ),
            (
                json!({"type": "object", "anyOf": {}}),
                "/anyOf is not a list",
            ),
        ];
        for (schema, expected) in cases {
            let found = problem(&schema).unwrap_or_default();
            assert!(found.contains(expected), "{schema}: {found}");
        }
    }
}
