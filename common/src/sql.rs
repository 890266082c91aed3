//! Enum columns read and written as the enum. The columns are `text` with a
//! CHECK of the names (not Postgres ENUM types, so every query comparing
//! them to a `$n::text` stays as it is): a row gives the enum, a parameter
//! takes it, and a name the code does not know is an error of the row,
//! never silently another value.

use crate::events::ScanStatus;
use crate::jobs::Engine;
use crate::Severity;

#[doc(hidden)]
pub use bytes::BytesMut;
#[doc(hidden)]
pub use postgres_types;

/// Implements `FromSql` and `ToSql` for an enum stored by name in a `text`
/// (or `varchar`) column: `$parse` reads a name (`fn(&str) ->
/// Option<Self>`), `as_str()` writes it. Arrays (`$n::text[]`) follow from
/// these.
#[macro_export]
macro_rules! text_column {
    ($ty:ty, $parse:expr) => {
        impl<'a> $crate::sql::postgres_types::FromSql<'a> for $ty {
            fn from_sql(
                ty: &$crate::sql::postgres_types::Type,
                raw: &'a [u8],
            ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
                let name = <&str as $crate::sql::postgres_types::FromSql>::from_sql(ty, raw)?;
                let parse: fn(&str) -> Option<$ty> = $parse;
                parse(name).ok_or_else(|| {
                    format!("unknown {} {name:?}", stringify!($ty)).into()
                })
            }

            fn accepts(ty: &$crate::sql::postgres_types::Type) -> bool {
                <&str as $crate::sql::postgres_types::FromSql>::accepts(ty)
            }
        }

        impl $crate::sql::postgres_types::ToSql for $ty {
            fn to_sql(
                &self,
                ty: &$crate::sql::postgres_types::Type,
                out: &mut $crate::sql::BytesMut,
            ) -> Result<$crate::sql::postgres_types::IsNull, Box<dyn std::error::Error + Sync + Send>>
            {
                $crate::sql::postgres_types::ToSql::to_sql(&self.as_str(), ty, out)
            }

            fn accepts(ty: &$crate::sql::postgres_types::Type) -> bool {
                <&str as $crate::sql::postgres_types::ToSql>::accepts(ty)
            }

            $crate::sql::postgres_types::to_sql_checked!();
        }
    };
}

/// The severity rank of the SQL expression `expr` (a severity's name):
/// critical 0 to info 4 as [`Severity::rank`] gives them, any other text
/// after info. Written from `Severity` itself, so SQL that sorts or
/// compares by severity cannot disagree with the code.
pub fn severity_rank(expr: &str) -> String {
    let mut sql = format!("CASE {expr}");
    for s in Severity::ALL {
        sql.push_str(&format!(" WHEN '{}' THEN {}", s.as_str(), s.rank()));
    }
    sql.push_str(&format!(" ELSE {} END", Severity::ALL.len()));
    sql
}

text_column!(ScanStatus, ScanStatus::parse);
text_column!(Engine, Engine::parse);
text_column!(Severity, Severity::parse);

#[cfg(test)]
mod tests {
    use postgres_types::{FromSql, ToSql, Type};

    use super::*;

    #[test]
    fn a_status_is_written_and_read_by_its_name() {
        let mut out = bytes::BytesMut::new();
        ScanStatus::Running.to_sql(&Type::TEXT, &mut out).unwrap();
        assert_eq!(&out[..], b"running");
        assert_eq!(
            ScanStatus::from_sql(&Type::TEXT, b"running").unwrap(),
            ScanStatus::Running
        );
        assert_eq!(
            Engine::from_sql(&Type::VARCHAR, b"recon").unwrap(),
            Engine::Recon
        );
    }

    #[test]
    fn the_sql_severity_rank_names_every_severity_with_its_rank() {
        assert_eq!(
            severity_rank("f.severity"),
            "CASE f.severity WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'medium' THEN 2 \
             WHEN 'low' THEN 3 WHEN 'info' THEN 4 ELSE 5 END"
        );
    }

    #[test]
    fn an_unknown_name_is_an_error_not_another_value() {
        let e = Severity::from_sql(&Type::TEXT, b"severe").unwrap_err();
        assert_eq!(e.to_string(), "unknown Severity \"severe\"");
        assert!(ScanStatus::from_sql(&Type::TEXT, b"done").is_err());
        assert!(!<Engine as ToSql>::accepts(&Type::INT4));
    }
}
