//! A string-valued enum that keeps values it does not know.
//!
//! The original writes plain strings for roles and statuses; a newer writer may add values. We
//! read those into an `Other(String)` variant and write them back unchanged instead of failing.

/// Declares a `Copy`-free string enum with known variants and an `Other(String)` catch-all,
/// with `serde` implementations that write the exact strings.
#[macro_export]
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A value this version does not know; kept verbatim.
            Other(String),
        }

        impl $name {
            /// The string written on disk.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)+
                    Self::Other(s) => s,
                }
            }

            /// Parses the on-disk string; unknown values become `Other`.
            pub fn parse(s: &str) -> Self {
                match s {
                    $($text => Self::$variant,)+
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl $crate::jsonw::Emit for $name {
            fn emit<L: $crate::jsonw::Layout>(
                &self,
                l: &mut L,
            ) -> ::core::result::Result<(), $crate::jsonw::Error> {
                $crate::jsonw::Emit::emit(self.as_str(), l)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                Ok(Self::parse(&s))
            }
        }

        // A string: the known values are listed, and any other string is accepted (and kept).
        impl $crate::schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut $crate::schemars::SchemaGenerator) -> $crate::schemars::Schema {
                $crate::schemars::json_schema!({
                    "type": "string",
                    "examples": [$($text),+],
                })
            }
        }
    };
}
