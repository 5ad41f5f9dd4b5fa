//! JSON records that keep the keys they do not know, in order.
//!
//! Every on-disk object (`meta.json`, a message line, a part, `usage`) is declared with
//! [`json_record!`]: its known keys become typed fields in the original's write order, every
//! other key lands in `extra` and is written back after the known ones. Optional fields are left
//! out when `None`, and `null` reads as absent, as the original's JavaScript does.
//!
//! The `Serialize`/`Deserialize` impls are written out (no `#[serde(flatten)]`) because flatten
//! buffers every record through an intermediate tree, which halves load speed on large logs.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// Keys a record does not know, in order. Allocated only when there are some: most records
/// have none, and an empty map in every message and part would double a loaded log's memory.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extra(Option<Box<Map<String, Value>>>);

impl Extra {
    /// No extra keys.
    pub fn new() -> Self {
        Self(None)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|m| m.is_empty())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.as_ref()?.get(key)
    }

    /// Adds or replaces `key`.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        self.0
            .get_or_insert_with(Default::default)
            .insert(key, value)
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.as_mut()?.shift_remove(key)
    }

    /// The keys and values, in order.
    pub fn iter(&self) -> ExtraIter<'_> {
        ExtraIter(self.0.as_deref().map(Map::iter))
    }
}

/// The keys and values of an [`Extra`], in order. A plain iterator, not a boxed one: every
/// record written goes through it (a recorded event too), and most have nothing in it, where a
/// box cost an allocation an event.
#[derive(Debug)]
pub struct ExtraIter<'a>(Option<serde_json::map::Iter<'a>>);

impl<'a> Iterator for ExtraIter<'a> {
    type Item = (&'a String, &'a Value);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.as_mut()?.next()
    }
}

impl<'a> IntoIterator for &'a Extra {
    type Item = (&'a String, &'a Value);
    type IntoIter = ExtraIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A map key, borrowed from the input when it has no escapes (serde's `Cow<str>` always copies).
pub struct Key<'de>(pub Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// How a field behaves when absent (read) or empty (write).
pub trait FieldValue: Sized {
    /// The value to use when the key is absent, or `None` if the key is required.
    fn when_absent() -> Option<Self> {
        None
    }
    /// Whether to leave the key out when writing.
    fn skip(&self) -> bool {
        false
    }
}

impl<T> FieldValue for Option<T> {
    fn when_absent() -> Option<Self> {
        Some(None)
    }
    fn skip(&self) -> bool {
        self.is_none()
    }
}

macro_rules! required_field {
    ($($t:ty),*) => { $(impl FieldValue for $t {})* };
}
required_field!(String, i64, u64, bool, Value);
impl<T> FieldValue for Vec<T> {}

/// Declares a JSON record type; see the module docs.
macro_rules! json_record {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $key:literal => pub $field:ident : $ty:ty ),+ $(,)?
        }
        $(
            // Keys the outputs add (derived, never written to the file): in the schema only.
            derived { $( $dkey:literal : $dty:ty ),* $(,)? }
        )?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )+
            /// Keys this version does not know, kept in order through a read-modify-write.
            pub extra: $crate::record::Extra,
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                use $crate::record::FieldValue;
                let mut map = s.serialize_map(None)?;
                $(
                    if !FieldValue::skip(&self.$field) {
                        map.serialize_entry($key, &self.$field)?;
                    }
                )+
                for (k, v) in &self.extra {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }

        // The same members written by hand (`jsonw`), for the outputs that print many records.
        impl $crate::jsonw::Emit for $name {
            fn emit<L: $crate::jsonw::Layout>(&self, l: &mut L) -> serde_json::Result<()> {
                use $crate::record::FieldValue;
                l.open(b'{');
                let mut first = true;
                $(
                    if !FieldValue::skip(&self.$field) {
                        $crate::jsonw::emit_key_member(
                            l,
                            &mut first,
                            $crate::quoted_key!($key),
                            &self.$field,
                        )?;
                    }
                )+
                for (k, v) in &self.extra {
                    $crate::jsonw::emit_member(l, &mut first, k, v)?;
                }
                l.close(b'}', first);
                Ok(())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " object"))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<$name, A::Error> {
                        use $crate::record::FieldValue;
                        $( let mut $field: Option<$ty> = None; )+
                        let mut extra = $crate::record::Extra::new();
                        while let Some($crate::record::Key(key)) = a.next_key::<$crate::record::Key<'de>>()? {
                            match key.as_ref() {
                                $( $key => { $field = Some(a.next_value()?); } )+
                                _ => { extra.insert(key.into_owned(), a.next_value()?); }
                            }
                        }
                        Ok($name {
                            $( $field: match $field {
                                Some(v) => v,
                                None => <$ty as FieldValue>::when_absent()
                                    .ok_or_else(|| serde::de::Error::missing_field($key))?,
                            }, )+
                            extra,
                        })
                    }
                }
                d.deserialize_map(V)
            }
        }

        // An object with the known keys (required unless they may be absent); any other key is
        // allowed, as reading keeps it.
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                use $crate::record::FieldValue;
                let mut properties = serde_json::Map::new();
                let mut required: Vec<serde_json::Value> = Vec::new();
                $(
                    properties.insert(
                        $key.to_owned(),
                        generator.subschema_for::<$ty>().to_value(),
                    );
                    if <$ty as FieldValue>::when_absent().is_none() {
                        required.push($key.into());
                    }
                )+
                $( $(
                    properties.insert(
                        $dkey.to_owned(),
                        generator.subschema_for::<$dty>().to_value(),
                    );
                )* )?
                schemars::json_schema!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                })
            }
        }
    };
}

pub(crate) use json_record;
