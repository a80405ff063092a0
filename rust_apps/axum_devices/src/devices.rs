//! The device data: the fixed list GET serves and the validation of a POSTed device. Pure, so it
//! is tested here without a server or a database.

use serde::{Deserialize, Serialize};

use server_common::RequestError;

/// Longest accepted `mac`, in characters (the column is `varchar(17)`).
pub const MAC_MAX_CHARS: usize = 17;
/// Longest accepted `firmware`, in characters (the column is `varchar(10)`).
pub const FIRMWARE_MAX_CHARS: usize = 10;

/// One device as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Device {
    pub id: i64,
    pub mac: String,
    pub firmware: String,
}

/// The exact list `GET /api/devices` returns, serialized once at start.
const FIXED: [(i64, &str, &str); 5] = [
    (1, "5F-33-CC-1F-43-82", "2.1.6"),
    (2, "EF-2B-C4-F5-D6-34", "2.1.5"),
    (3, "62-46-13-B7-B3-A1", "3.0.0"),
    (4, "96-A8-DE-5B-77-14", "1.0.1"),
    (5, "7E-3B-62-A6-09-12", "3.5.6"),
];

/// The fixed device list.
#[must_use]
pub fn fixed_devices() -> Vec<Device> {
    FIXED
        .iter()
        .map(|&(id, mac, firmware)| Device {
            id,
            mac: mac.to_owned(),
            firmware: firmware.to_owned(),
        })
        .collect()
}

/// The body of `POST /api/devices`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NewDevice {
    pub mac: String,
    pub firmware: String,
}

impl NewDevice {
    /// Parses and validates a request body.
    ///
    /// # Errors
    /// [`RequestError::BadRequest`] naming the first problem found.
    pub fn from_json(body: &[u8]) -> Result<Self, RequestError> {
        let device: Self = server_common::json_object(body)?;
        check_text("mac", &device.mac, MAC_MAX_CHARS)?;
        check_text("firmware", &device.firmware, FIRMWARE_MAX_CHARS)?;
        Ok(device)
    }
}

fn check_text(field: &str, value: &str, max_chars: usize) -> Result<(), RequestError> {
    if value.is_empty() {
        return Err(RequestError::BadRequest(format!(
            "{field} must not be empty"
        )));
    }
    if value.chars().count() > max_chars {
        return Err(RequestError::BadRequest(format!(
            "{field} longer than {max_chars} characters"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(body: &str) -> String {
        match NewDevice::from_json(body.as_bytes()) {
            Err(RequestError::BadRequest(reason)) => reason,
            other => panic!("expected a 400 for {body}, got {other:?}"),
        }
    }

    #[test]
    fn accepts_a_valid_device() {
        let d = NewDevice::from_json(br#"{"mac":"5F-33-CC-1F-43-82","firmware":"2.1.6"}"#).unwrap();
        assert_eq!(d.mac, "5F-33-CC-1F-43-82");
        assert_eq!(d.firmware, "2.1.6");
    }

    #[test]
    fn limits_count_characters_not_bytes() {
        // 17 two-byte characters fit a varchar(17).
        let mac = "é".repeat(17);
        assert!(
            NewDevice::from_json(format!(r#"{{"mac":"{mac}","firmware":"1"}}"#).as_bytes()).is_ok()
        );
    }

    #[test]
    fn rejects_bad_bodies() {
        assert_eq!(reason(""), "body must be a JSON object");
        assert_eq!(reason(r#"["a","b"]"#), "body must be a JSON object");
        assert!(reason("{").starts_with("invalid JSON body"));
        assert!(reason(r#"{"mac":"a","firmware":"b"} x"#).starts_with("invalid JSON body"));
        assert!(reason(r#"{"mac":"a"}"#).contains("missing field `firmware`"));
        assert!(reason(r#"{"mac":1,"firmware":"1"}"#).starts_with("invalid JSON body"));
        assert!(reason(r#"{"mac":null,"firmware":"1"}"#).starts_with("invalid JSON body"));
        assert_eq!(
            reason(r#"{"mac":"","firmware":"1"}"#),
            "mac must not be empty"
        );
        assert_eq!(
            reason(r#"{"mac":"a","firmware":""}"#),
            "firmware must not be empty"
        );
        assert_eq!(
            reason(r#"{"mac":"123456789012345678","firmware":"1"}"#),
            "mac longer than 17 characters"
        );
        assert_eq!(
            reason(r#"{"mac":"a","firmware":"12345678901"}"#),
            "firmware longer than 10 characters"
        );
    }
}
