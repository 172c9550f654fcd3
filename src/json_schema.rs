//! JSON Schemas of kbench's two file formats, generated from their serde types (schemars) so they
//! cannot drift from what kbench reads: `draft04` turns schemars' draft-07 output into the draft
//! 04 that Taplo (Even Better TOML) and Tombi understand. The manifest's schema is built in
//! `manifest::json_schema`, the results' in `record::json_schema`.

use serde_json::{Map, Value};

/// Draft 04's meta-schema, as `$schema` names it.
pub const DRAFT_04: &str = "http://json-schema.org/draft-04/schema#";

/// schemars' settings for both formats: draft 07, definitions under `/definitions` (the results'
/// schema stays draft 07; the manifest's goes on to `draft04`).
pub fn generator() -> schemars::SchemaGenerator {
    schemars::generate::SchemaSettings::draft07().into_generator()
}

/// Rewrites a draft-07 schema into draft 04: `$schema`, numeric `exclusiveMinimum` /
/// `exclusiveMaximum` into the boolean form beside `minimum` / `maximum`, `const` into a
/// one-valued `enum`; and drops what draft 04 lacks (`examples`, integer `format`s such as
/// `uint32`, which only schemars knows) and the `null` schemars allows for an `Option` and gives
/// it as its default (a TOML file has no null: an optional key is written or left out).
pub fn draft04(mut schema: Value) -> Value {
    rewrite(&mut schema);
    if let Value::Object(root) = &mut schema {
        root.insert("$schema".into(), DRAFT_04.into());
    }
    schema
}

fn rewrite(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (bound, inclusive) in [
                ("exclusiveMinimum", "minimum"),
                ("exclusiveMaximum", "maximum"),
            ] {
                if let Some(limit @ Value::Number(_)) = map.remove(bound) {
                    map.insert(inclusive.into(), limit);
                    map.insert(bound.into(), Value::Bool(true));
                }
            }
            if let Some(constant) = map.remove("const") {
                map.insert("enum".into(), Value::Array(vec![constant]));
            }
            map.remove("examples");
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !DRAFT_04_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            drop_null_type(map);
            map.values_mut().for_each(rewrite);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite),
        _ => {}
    }
}

const DRAFT_04_FORMATS: &[&str] = &["date-time", "email", "hostname", "ipv4", "ipv6", "uri"];

/// schemars types an `Option<T>` as `T` or null: keeps `T`.
fn drop_null_type(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = map.get_mut(key) {
            options.retain(|o| o.get("type") != Some(&Value::from("null")));
            if options.len() == 1 {
                let only = options.remove(0);
                map.remove(key);
                if let Value::Object(only) = only {
                    for (k, v) in only {
                        map.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
}
