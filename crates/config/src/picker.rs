//! The Gateway API Inference Extension's `EndpointPickerConfig`: the file a scheduler's
//! `pickerConfigFile` (or `configMapRef`) names, as written.
//!
//! This module holds the format and its parse; what each plugin means, and turning the document
//! into a picker profile, is the picker's (`infergate_picker::config`). Unknown fields are
//! errors naming them, so a misspelt knob is never silently ignored:
//!
//! ```yaml
//! apiVersion: inference.networking.x-k8s.io/v1alpha1
//! kind: EndpointPickerConfig
//! plugins:
//!   - type: queue-scorer
//!   - type: max-score-picker
//!     parameters: {maxNumOfEndpoints: 2}
//! schedulingProfiles:
//!   - name: default
//!     plugins:
//!       - {pluginRef: queue-scorer, weight: 2}
//!       - {pluginRef: max-score-picker}
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `kind` the document has, when it says.
pub const KIND: &str = "EndpointPickerConfig";

/// An `EndpointPickerConfig` document.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointPickerConfig {
    /// `inference.networking.x-k8s.io/v1alpha1`; not checked, as upstream has used several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// [`KIND`] when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Declared plugins.
    #[serde(default)]
    pub plugins: Vec<PluginSpec>,
    /// Profiles referring to the plugins by name.
    #[serde(default)]
    pub scheduling_profiles: Vec<SchedulingProfileSpec>,
}

/// A declared plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginSpec {
    /// The plugin type, e.g. `queue-scorer`.
    #[serde(rename = "type")]
    pub plugin_type: String,
    /// The name profiles use; defaults to the type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Type-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<BTreeMap<String, ParamValue>>,
}

/// A scheduling profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulingProfileSpec {
    /// The profile's name.
    pub name: String,
    /// The plugins it uses.
    #[serde(default)]
    pub plugins: Vec<PluginRef>,
}

/// A plugin used by a profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginRef {
    /// A declared plugin's name.
    pub plugin_ref: String,
    /// Scorer weight (default 1); only scorers take one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

/// A plugin parameter as written: an untyped value tree, so that any serde format carries it
/// and each plugin checks the names and types it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A number with a fraction.
    Float(f64),
    /// A string.
    Str(String),
    /// A list.
    List(Vec<ParamValue>),
    /// A map.
    Map(BTreeMap<String, ParamValue>),
}

/// Why an `EndpointPickerConfig` document was refused; each names the field.
#[derive(Debug, thiserror::Error)]
pub enum PickerConfigError {
    /// Not YAML, an unknown field (named), or a value of the wrong type; the message starts
    /// with the field's path.
    #[error(transparent)]
    Syntax(#[from] serde_norway::Error),
    /// A field whose value breaks a rule of the format.
    #[error("{field}: {reason}")]
    Invalid {
        /// Path of the field, like `kind`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl PickerConfigError {
    /// The path of the offending field, when the error is a rule violation.
    pub fn field(&self) -> Option<&str> {
        match self {
            PickerConfigError::Invalid { field, .. } => Some(field),
            PickerConfigError::Syntax(_) => None,
        }
    }
}

/// Parses and checks an `EndpointPickerConfig` document (YAML, so JSON too). Reading the file
/// is the caller's: this crate does no I/O.
pub fn from_yaml_str(text: &str) -> Result<EndpointPickerConfig, PickerConfigError> {
    let config: EndpointPickerConfig = serde_norway::from_str(text)?;
    config.validate()?;
    Ok(config)
}

impl EndpointPickerConfig {
    /// Checks the rules of the format itself (what [`from_yaml_str`] does after parsing); what
    /// each plugin takes is checked where plugins are understood, in the picker.
    pub fn validate(&self) -> Result<(), PickerConfigError> {
        if let Some(kind) = self.kind.as_deref().filter(|k| *k != KIND) {
            return Err(PickerConfigError::Invalid {
                field: "kind".into(),
                reason: format!("expected {KIND}, got {kind:?}"),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
  - type: queue-scorer
  - type: max-score-picker
    parameters: {maxNumOfEndpoints: 2}
schedulingProfiles:
  - name: default
    plugins:
      - {pluginRef: queue-scorer, weight: 2}
      - {pluginRef: max-score-picker}
"#;

    #[test]
    fn the_documented_example_parses_as_written() {
        let c = from_yaml_str(EXAMPLE).unwrap();
        assert_eq!(c.plugins.len(), 2);
        assert_eq!(
            c.plugins[1].parameters.as_ref().unwrap()["maxNumOfEndpoints"],
            ParamValue::Int(2)
        );
        assert_eq!(c.scheduling_profiles[0].plugins[0].weight, Some(2.0));
    }

    #[test]
    fn an_unknown_field_is_an_error_naming_its_path() {
        let err = from_yaml_str(&EXAMPLE.replace("weight: 2", "weigth: 2"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("schedulingProfiles[0].plugins[0]"), "{err}");
        assert!(err.contains("weigth"), "{err}");
    }

    #[test]
    fn another_kind_is_refused_naming_the_field() {
        let err = from_yaml_str(&EXAMPLE.replace("kind: EndpointPickerConfig", "kind: Deployment"))
            .unwrap_err();
        assert_eq!(err.field(), Some("kind"));
        assert!(err.to_string().starts_with("kind: "), "{err}");
    }
}
