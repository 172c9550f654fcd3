//! The manifest's JSON Schema, printed by `kbench schema` for editors (Taplo / Even Better TOML,
//! Tombi): generated from the serde types the manifest is read into (`RawManifest` and below),
//! so a key added there is in the schema; the keys whose values serde takes as raw TOML (grid
//! axes, variant parameters, table and claim fields named by text) are typed here from the
//! algorithms' specs.
//!
//! What one schema cannot say: which axes, implementations and kernels belong to the manifest's
//! algorithm (it offers those of every algorithm), and the checks across keys (zip lengths,
//! where-filters, a baseline naming a variant, min below max samples). `kbench check` says those.
//! A custom study (`algorithm = "custom"`) names its own axes and kernels, so the grid, a
//! variant's `kernel` and its `params` are open in the schema's properties, and closed to the
//! built-ins' names by a branch that holds unless the algorithm is `custom` (draft 04 has no
//! if/then: `anyOf` [algorithm is custom, the names are the built-ins'] says the same).

use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Value};

use crate::algos::{self, AxisDef, AxisKind};

/// The manifest's schema, draft 04.
pub fn manifest_schema() -> Value {
    let mut schema = crate::json_schema::generator()
        .into_root_schema_for::<super::RawManifest>()
        .to_value();
    schema["title"] = "kbench study manifest".into();
    schema["description"] = "A kbench study: the algorithm, its grid of parameters, the variants \
        timed over it, how to measure, and the tables and claims to report. \
        `kbench check FILE` validates what this schema cannot (see README)."
        .into();
    let mut schema = crate::json_schema::draft04(schema);
    open_names_to_custom_studies(&mut schema);
    schema
}

/// Opens the grid's axis names, a variant's `kernel` and its `params` to any name (a custom
/// study's own), and closes them again to the built-ins' unless the study's algorithm is
/// `custom`.
fn open_names_to_custom_studies(schema: &mut Value) {
    let any_axis = json!({
        "description": "an axis of the study's own ([[custom.axis]]): a value, a list, { pow2 = [lo, hi] } or { start, stop, step }"
    });
    let strict_grid = schema["properties"]["grid"].clone();
    let variant = &mut schema["definitions"]["RawVariant"]["properties"];
    let strict_kernel = variant["kernel"].clone();
    let strict_params = variant["params"].clone();
    variant["kernel"] = json!({
        "description": "the kernel this variant runs: one of the algorithm's, or a [[custom.kernel]] name",
        "anyOf": [strict_kernel, { "type": "string" }]
    });
    variant["params"]["additionalProperties"] = any_axis.clone();
    let grid = &mut schema["properties"]["grid"];
    // A custom study's axis may share a built-in's name and not its values (a block of 96
    // threads, a `u8` dtype): the built-ins' types hold in the strict branch below alone.
    if let Some(properties) = grid["properties"].as_object_mut() {
        for (name, value) in properties.iter_mut() {
            if name != "where" && name != "zip" {
                let description = value["description"].clone();
                *value = json!({ "description": description });
            }
        }
    }
    grid["additionalProperties"] = any_axis;
    grid["properties"]["zip"]["items"]["items"] = json!({ "type": "string" });
    schema["anyOf"] = json!([
        { "properties": { "study": { "properties": { "algorithm": { "enum": [crate::custom::CUSTOM] } } } } },
        { "properties": {
            "grid": strict_grid,
            "variant": { "items": { "properties": { "kernel": strict_kernel, "params": strict_params } } }
        } }
    ]);
}

/// Every axis name of every algorithm, in the order the algorithms declare them, with each
/// algorithm's definition of it.
fn axes() -> Vec<(&'static str, Vec<(&'static str, &'static AxisDef)>)> {
    let mut found: Vec<(&'static str, Vec<(&'static str, &'static AxisDef)>)> = Vec::new();
    for algorithm in algos::all() {
        let spec = algorithm.spec();
        for def in spec.axes {
            match found.iter_mut().find(|(name, _)| *name == def.name) {
                Some((_, defs)) => defs.push((spec.name, def)),
                None => found.push((def.name, vec![(spec.name, def)])),
            }
        }
    }
    found
}

/// One value of an axis of `kind`.
fn scalar(kind: AxisKind) -> Value {
    match kind {
        AxisKind::Size => json!({ "type": "integer", "minimum": 0 }),
        AxisKind::BlockSize => json!({ "type": "integer", "enum": [32, 64, 128, 256, 512, 1024] }),
        AxisKind::Int { min, max } => json!({ "type": "integer", "minimum": min, "maximum": max }),
        AxisKind::Float { min, max } => json!({ "type": "number", "minimum": min, "maximum": max }),
        AxisKind::Dtype(allowed) => {
            json!({ "type": "string", "enum": allowed.iter().map(|d| d.name()).collect::<Vec<_>>() })
        }
        AxisKind::Choice(names) => json!({ "type": "string", "enum": names }),
        AxisKind::File(_) => json!({
            "type": "string",
            "description": "a file path or glob (relative to the current folder), or a generator such as \"hpcg:16\""
        }),
    }
}

/// One value of an axis, over every algorithm that has it: one schema where they agree, the
/// union of the names where each takes names, else any of them.
fn scalar_of(defs: &[(&str, &AxisDef)]) -> Value {
    let mut distinct: Vec<Value> = Vec::new();
    for (_, def) in defs {
        let s = scalar(def.kind);
        if !distinct.contains(&s) {
            distinct.push(s);
        }
    }
    let all_named = distinct
        .iter()
        .all(|s| s["type"] == "string" && s.get("enum").is_some());
    if distinct.len() == 1 {
        distinct.remove(0)
    } else if all_named {
        let mut names: Vec<Value> = Vec::new();
        for s in &distinct {
            for name in s["enum"].as_array().expect("checked") {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        json!({ "type": "string", "enum": names })
    } else {
        json!({ "anyOf": distinct })
    }
}

/// An axis in `[grid]` or a variant's `params`: a value, a list, and for numbers a range table.
fn axis_values(name: &str, defs: &[(&str, &AxisDef)]) -> Value {
    let one = scalar_of(defs);
    let mut options = vec![
        one.clone(),
        json!({ "type": "array", "minItems": 1, "items": one }),
    ];
    let numeric = defs.iter().any(|(_, d)| {
        matches!(
            d.kind,
            AxisKind::Size | AxisKind::BlockSize | AxisKind::Int { .. } | AxisKind::Float { .. }
        )
    });
    if numeric {
        options.push(json!({
            "type": "object",
            "description": "powers of two from 2^lo to 2^hi",
            "properties": { "pow2": {
                "type": "array", "minItems": 2, "maxItems": 2,
                "items": { "type": "integer", "minimum": 0, "maximum": 62 }
            } },
            "required": ["pow2"],
            "additionalProperties": false
        }));
        options.push(json!({
            "type": "object",
            "description": "start, start + step, ... up to and including stop",
            "properties": {
                "start": { "type": "integer" },
                "stop": { "type": "integer" },
                "step": { "type": "integer", "minimum": 1 }
            },
            "required": ["start", "stop"],
            "additionalProperties": false
        }));
    }
    let algorithms: Vec<&str> = defs.iter().map(|(a, _)| *a).collect();
    json!({
        "description": format!("{name}: {} (algorithms: {})", defs[0].1.doc, algorithms.join(", ")),
        "anyOf": options
    })
}

/// Every axis of every algorithm, as an object's properties, with `extra` beside them.
fn axes_object(extra: Value) -> Schema {
    let mut properties = serde_json::Map::new();
    for (name, defs) in axes() {
        properties.insert(name.to_string(), axis_values(name, &defs));
    }
    if let Value::Object(extra) = extra {
        properties.extend(extra);
    }
    json_schema!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false
    })
}

/// `[grid]`: the axes, `zip` and `where`.
pub(super) fn grid(_: &mut SchemaGenerator) -> Schema {
    let names = axis_names();
    let mut schema = axes_object(json!({
        "zip": {
            "description": "groups of axes that advance together instead of crossing, e.g. [[\"n\", \"block\"]]",
            "type": "array",
            "items": { "type": "array", "minItems": 1, "items": { "type": "string", "enum": names } }
        },
        "where": {
            "description": "keeps only the grid points where this holds, e.g. \"n >= block and dtype != 'i32'\"",
            "type": "string"
        }
    }));
    schema.insert(
        "description".into(),
        "The axes of the algorithm (`kbench list` shows them): a value, a list, { pow2 = [lo, hi] } or { start, stop, step }".into(),
    );
    schema
}

/// A variant's `params`: axis values that replace the grid's for this variant.
pub(super) fn params(_: &mut SchemaGenerator) -> Schema {
    axes_object(json!({}))
}

/// A table's or claim's `select`: for each axis, the value or values kept.
pub(super) fn select(_: &mut SchemaGenerator) -> Schema {
    let mut properties = serde_json::Map::new();
    for (name, defs) in axes() {
        let one = scalar_of(&defs);
        properties.insert(
            name.to_string(),
            json!({ "anyOf": [one, { "type": "array", "minItems": 1, "items": one }] }),
        );
    }
    json_schema!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false
    })
}

fn axis_names() -> Vec<&'static str> {
    axes().into_iter().map(|(name, _)| name).collect()
}

/// A string that must be one of `names`.
pub(super) fn names_of(names: Vec<&str>) -> Schema {
    json_schema!({ "type": "string", "enum": names })
}

pub(super) fn algorithm(_: &mut SchemaGenerator) -> Schema {
    let mut names = algos::names();
    // A study's own kernels, declared in its `[custom]` table.
    names.push(crate::custom::CUSTOM);
    names_of(names)
}

/// A study's or variant's name: it names files and folders.
pub(super) fn safe_name(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": "^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$"
    })
}

/// A CPU variant's `impl`: one of the algorithm's CPU implementations.
pub(super) fn cpu_impl(_: &mut SchemaGenerator) -> Schema {
    names_of(every(|spec| &spec.cpu_impls))
}

/// A CUDA variant's `kernel`: one of the algorithm's kernels.
pub(super) fn kernel(_: &mut SchemaGenerator) -> Schema {
    names_of(every(|spec| &spec.kernels))
}

fn every(of: fn(&algos::Spec) -> &[&'static str]) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for algorithm in algos::all() {
        for name in of(algorithm.spec()) {
            if !names.contains(name) {
                names.push(name);
            }
        }
    }
    names
}

/// A table's `rows` or `columns`: `variant` or an axis.
pub(super) fn dimension(_: &mut SchemaGenerator) -> Schema {
    let mut names = vec!["variant"];
    names.extend(axis_names());
    names_of(names)
}

pub(super) fn axis_name(_: &mut SchemaGenerator) -> Schema {
    names_of(axis_names())
}
