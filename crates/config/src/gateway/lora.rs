//! LoRA adapter → base-model maps: `spec.loraAdapterMaps`, upstream's BBR ConfigMaps, and each
//! scheduler's `loraAdapters`, merged into one [`AdapterTable`].
//!
//! An upstream ConfigMap looks like this (several may name the same base model, to shard long
//! lists):
//!
//! ```yaml
//! apiVersion: v1
//! kind: ConfigMap
//! metadata:
//!   name: deepseek-adapters
//!   labels:
//!     inference.networking.k8s.io/bbr-managed: "true"
//! data:
//!   baseModel: deepseek/vllm-deepseek-r1
//!   adapters: |
//!     - ski-resorts
//!     - movie-critique
//! ```

use serde::Deserialize;
use std::collections::BTreeMap;

use super::defaults::{self, limits};
use super::error::{invalid, GatewayConfigError};
use super::meta::ObjectMeta;
use super::scheduler::SchedulerSpec;

/// `spec.loraAdapterMaps[]`, or the data of one ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoraAdapterMap {
    /// The base model the adapters run on.
    pub base_model: String,
    /// The adapters.
    #[serde(default)]
    pub adapters: Vec<String>,
}

/// A map read from a ConfigMap, with the ConfigMap's name for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapAdapterMap {
    /// `metadata.name`.
    pub name: String,
    /// Its data.
    pub map: LoraAdapterMap,
}

impl ConfigMapAdapterMap {
    /// Reads one or more ConfigMaps: several YAML documents, or a `kind: List`. Each must carry
    /// the label `inference.networking.k8s.io/bbr-managed: "true"`, as upstream BBR requires.
    pub fn parse_all(yaml: &str) -> Result<Vec<ConfigMapAdapterMap>, GatewayConfigError> {
        let mut out = Vec::new();
        for document in serde_norway::Deserializer::from_str(yaml) {
            let doc = Document::deserialize(document)?;
            match doc.kind.as_str() {
                "List" => {
                    if doc.data.is_some() {
                        return Err(invalid("data", "a List holds `items`, not `data`"));
                    }
                    for (i, item) in doc.items.into_iter().flatten().enumerate() {
                        out.push(item.into_map(&format!("items[{i}]"))?);
                    }
                }
                _ => {
                    if doc.items.is_some() {
                        return Err(invalid("items", "only a `kind: List` holds `items`"));
                    }
                    let cm = ConfigMapDoc {
                        api_version: doc.api_version,
                        kind: doc.kind,
                        metadata: doc.metadata.unwrap_or_default(),
                        data: doc.data,
                        immutable: doc.immutable,
                    };
                    out.push(cm.into_map("")?);
                }
            }
        }
        Ok(out)
    }
}

/// One YAML document: a ConfigMap or a List of them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Document {
    api_version: String,
    kind: String,
    #[serde(default)]
    metadata: Option<ObjectMeta>,
    #[serde(default)]
    data: Option<ConfigMapData>,
    #[serde(default)]
    immutable: Option<bool>,
    #[serde(default)]
    items: Option<Vec<ConfigMapDoc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConfigMapDoc {
    api_version: String,
    kind: String,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    data: Option<ConfigMapData>,
    /// Accepted (exported ConfigMaps carry it); it changes nothing here.
    #[serde(default)]
    #[allow(dead_code)]
    immutable: Option<bool>,
}

/// The two data keys BBR reads.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConfigMapData {
    base_model: String,
    /// A YAML list, inside a string.
    #[serde(default)]
    adapters: Option<String>,
}

impl ConfigMapDoc {
    fn into_map(self, at: &str) -> Result<ConfigMapAdapterMap, GatewayConfigError> {
        let prefix = if at.is_empty() {
            String::new()
        } else {
            format!("{at}.")
        };
        if self.api_version != "v1" || self.kind != "ConfigMap" {
            return Err(invalid(
                format!("{prefix}kind"),
                format!(
                    "expected a v1 ConfigMap, got {} {}",
                    self.api_version, self.kind
                ),
            ));
        }
        let name = self
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| "(unnamed)".to_owned());
        let origin = format!("ConfigMap/{name}");
        if self
            .metadata
            .labels
            .get(defaults::BBR_MANAGED_LABEL)
            .map(String::as_str)
            != Some("true")
        {
            return Err(invalid(
                format!("{origin} metadata.labels"),
                format!(
                    "a LoRA adapter ConfigMap carries the label {}: \"true\" (upstream BBR reads \
                     no other)",
                    defaults::BBR_MANAGED_LABEL
                ),
            ));
        }
        let data = self
            .data
            .ok_or_else(|| invalid(format!("{origin} data"), "needs baseModel and adapters"))?;
        let adapters = match data.adapters.as_deref().map(str::trim) {
            None | Some("") => Vec::new(),
            Some(text) => serde_norway::from_str::<Option<Vec<String>>>(text)
                .map_err(|e| {
                    invalid(
                        format!("{origin} data.adapters"),
                        format!("must be a YAML list of adapter names in a string: {e}"),
                    )
                })?
                .unwrap_or_default(),
        };
        Ok(ConfigMapAdapterMap {
            name,
            map: LoraAdapterMap {
                // Upstream BBR trims it: a map written with a trailing newline (a YAML block
                // scalar) names the same model.
                base_model: data.base_model.trim().to_owned(),
                adapters,
            },
        })
    }
}

/// Where an adapter's mapping came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterEntry {
    /// Its base model.
    pub base_model: String,
    /// The field (or ConfigMap) that first mapped it, like `spec.loraAdapterMaps[0].adapters[2]`.
    pub origin: String,
}

/// Every adapter with its base model. An adapter has exactly one base model; two sources that
/// disagree are an error naming both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdapterTable {
    entries: BTreeMap<String, AdapterEntry>,
}

impl AdapterTable {
    /// Merges, in order: each scheduler's `loraAdapters` (base model: its `modelName`),
    /// `spec.loraAdapterMaps` (`maps`), then the ConfigMaps. It takes the two lists rather than
    /// the whole spec, so that this module needs only the parts of the document it merges.
    pub fn build(
        schedulers: &[SchedulerSpec],
        maps: &[LoraAdapterMap],
        config_maps: &[ConfigMapAdapterMap],
    ) -> Result<AdapterTable, GatewayConfigError> {
        let mut table = AdapterTable::default();
        for (i, s) in schedulers.iter().enumerate() {
            for (j, adapter) in s.lora_adapters.iter().enumerate() {
                let origin = format!("spec.schedulers[{i}].loraAdapters[{j}]");
                table.insert(adapter, &s.model_name, origin)?;
            }
        }
        for (i, m) in maps.iter().enumerate() {
            table.insert_map(m, &format!("spec.loraAdapterMaps[{i}]"))?;
        }
        for cm in config_maps {
            table.insert_map(&cm.map, &format!("ConfigMap/{} data", cm.name))?;
        }
        Ok(table)
    }

    fn insert_map(&mut self, m: &LoraAdapterMap, at: &str) -> Result<(), GatewayConfigError> {
        check_name(&m.base_model, limits::MODEL_NAME_LEN)
            .map_err(|r| invalid(format!("{at}.baseModel"), r))?;
        for (j, adapter) in m.adapters.iter().enumerate() {
            self.insert(adapter, &m.base_model, format!("{at}.adapters[{j}]"))?;
        }
        Ok(())
    }

    /// Adds one mapping; `origin` names where it is written.
    pub fn insert(
        &mut self,
        adapter: &str,
        base_model: &str,
        origin: String,
    ) -> Result<(), GatewayConfigError> {
        check_name(adapter, limits::ADAPTER_NAME_LEN).map_err(|r| invalid(&origin, r))?;
        if adapter == base_model {
            return Err(invalid(
                origin,
                format!("adapter `{adapter}` is named like its own base model"),
            ));
        }
        match self.entries.get(adapter) {
            Some(first) if first.base_model != base_model => Err(invalid(
                origin,
                format!(
                    "adapter `{adapter}` already belongs to base model `{}` ({}); an adapter \
                     has one base model",
                    first.base_model, first.origin
                ),
            )),
            Some(_) => Ok(()),
            None => {
                self.entries.insert(
                    adapter.to_owned(),
                    AdapterEntry {
                        base_model: base_model.to_owned(),
                        origin,
                    },
                );
                Ok(())
            }
        }
    }

    /// The base model of an adapter.
    pub fn base_model(&self, adapter: &str) -> Option<&str> {
        self.entries.get(adapter).map(|e| e.base_model.as_str())
    }

    /// Every adapter, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &AdapterEntry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many adapters.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A model or adapter name: not empty, no surrounding whitespace, at most `max` characters.
pub(crate) fn check_name(name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() {
        Err("must not be empty".into())
    } else if name.trim() != name {
        Err(format!("`{name}` has leading or trailing whitespace"))
    } else if name.chars().count() > max {
        Err(format!("`{name}` is longer than {max} characters"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPSTREAM: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: deepseek-adapters
  labels:
    inference.networking.k8s.io/bbr-managed: "true"
data:
  baseModel: deepseek/vllm-deepseek-r1
  adapters: |
    - ski-resorts
    - movie-critique
"#;

    #[test]
    fn the_upstream_configmap_reads() {
        let maps = ConfigMapAdapterMap::parse_all(UPSTREAM).unwrap();
        assert_eq!(maps.len(), 1);
        assert_eq!(maps[0].name, "deepseek-adapters");
        assert_eq!(maps[0].map.base_model, "deepseek/vllm-deepseek-r1");
        assert_eq!(maps[0].map.adapters, ["ski-resorts", "movie-critique"]);
    }

    #[test]
    fn several_documents_and_lists_read_and_may_share_a_base_model() {
        let second = UPSTREAM
            .replace("deepseek-adapters", "deepseek-adapters-2")
            .replace("ski-resorts", "sql")
            .replace("movie-critique", "chat");
        let multi = format!("{UPSTREAM}---{second}");
        let maps = ConfigMapAdapterMap::parse_all(&multi).unwrap();
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].map.base_model, maps[1].map.base_model);

        let list = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
    labels: {inference.networking.k8s.io/bbr-managed: "true"}
  data: {baseModel: base, adapters: "[x, y]"}
"#;
        let maps = ConfigMapAdapterMap::parse_all(list).unwrap();
        assert_eq!(maps[0].map.adapters, ["x", "y"]);
    }

    #[test]
    fn a_configmap_without_the_bbr_label_is_refused() {
        let yaml = UPSTREAM.replace("\"true\"", "\"false\"");
        let err = ConfigMapAdapterMap::parse_all(&yaml).unwrap_err();
        assert_eq!(
            err.field(),
            Some("ConfigMap/deepseek-adapters metadata.labels")
        );
    }

    #[test]
    fn adapters_must_be_a_list_in_a_string() {
        let yaml = UPSTREAM.replace("    - ski-resorts\n    - movie-critique\n", "    a: b\n");
        let err = ConfigMapAdapterMap::parse_all(&yaml).unwrap_err();
        assert_eq!(
            err.field(),
            Some("ConfigMap/deepseek-adapters data.adapters")
        );
        let err = ConfigMapAdapterMap::parse_all(&UPSTREAM.replace("baseModel", "base"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("base"), "{err}");
    }

    #[test]
    fn an_adapter_with_two_base_models_is_an_error_naming_both_places() {
        let mut t = AdapterTable::default();
        t.insert("sql", "llama", "first".into()).unwrap();
        t.insert("sql", "llama", "again".into()).unwrap();
        let err = t.insert("sql", "qwen", "second".into()).unwrap_err();
        assert_eq!(err.field(), Some("second"));
        assert!(err.to_string().contains("first"), "{err}");
        assert_eq!(t.base_model("sql"), Some("llama"));
    }
}
