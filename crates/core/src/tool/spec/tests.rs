use super::*;

/// Arguments with optional fields of each shape schemars gives them.
#[derive(serde::Deserialize, JsonSchema)]
#[expect(dead_code, reason = "only the schema is used")]
#[serde(deny_unknown_fields)]
struct Args {
    /// Always there.
    name: String,
    /// A plain optional value.
    limit: Option<u32>,
    /// An optional enum (an `anyOf` with `null`).
    mode: Option<Mode>,
}

#[derive(serde::Deserialize, JsonSchema)]
enum Mode {
    /// One.
    One,
    /// Two.
    Two,
}

#[test]
fn the_model_schema_drops_only_what_means_nothing() {
    let spec = ToolSpec::new::<Args>("t", "A tool.");
    let full = &spec.parameters;
    let model = spec.model_schema();
    assert!(full.get("description").is_some());
    assert_eq!(model.get("description"), None);
    assert_eq!(model["required"], full["required"]);
    assert_eq!(model["properties"]["name"], full["properties"]["name"]);
    assert_eq!(model["properties"]["limit"]["type"], "integer");
    assert_eq!(model["properties"]["limit"]["minimum"], 0);
    let mode = &model["properties"]["mode"];
    assert_eq!(mode.get("anyOf"), None, "{mode}");
    assert_eq!(
        mode["description"],
        "An optional enum (an `anyOf` with `null`)."
    );
    assert!(
        mode.get("oneOf").is_some() || mode.get("enum").is_some(),
        "{mode}"
    );
    assert!(!model.to_string().contains("\"null\""), "{model}");
    // What the model schema accepts, the full one accepts: it only left alternatives out.
    let strict = jsonschema::validator_for(&model).unwrap();
    let lenient = jsonschema::validator_for(full).unwrap();
    for args in [
        serde_json::json!({"name": "x"}),
        serde_json::json!({"name": "x", "limit": 3, "mode": "One"}),
    ] {
        assert!(strict.is_valid(&args) && lenient.is_valid(&args), "{args}");
    }
    assert!(!strict.is_valid(&serde_json::json!({"name": "x", "limit": -1})));
    assert!(lenient.is_valid(&serde_json::json!({"name": "x", "limit": null})));
    // An unknown argument: the model is not told objects are closed, the validator still is.
    assert!(
        !model.to_string().contains("additionalProperties"),
        "{model}"
    );
    assert!(!lenient.is_valid(&serde_json::json!({"name": "x", "other": 1})));
}
