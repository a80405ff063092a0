//! Cross-module properties: the paths agree on every dataset, and no bytes make them panic.

use crate::*;

fn outcomes(data: &[u8]) -> Vec<Result<Outcome, Error>> {
    DeserializePath::ALL
        .iter()
        .map(|&p| deserialize_reply(data, p))
        .collect()
}

#[test]
fn paths_agree_on_every_dataset() {
    for dataset in Dataset::ALL {
        for n in [0, 1, 7] {
            let reply = encode_dataset_reply(dataset, n);
            let results = outcomes(&reply);
            let first = results[0].as_ref().expect("clone path succeeds");
            assert_eq!(first.documents, n);
            for r in &results {
                assert_eq!(r.as_ref().ok(), Some(first), "{dataset} n={n}");
            }
        }
    }
}

#[test]
fn json_lists_the_documents() {
    for path in DeserializePath::ALL {
        let json = documents_json(&encode_reply(2), path).expect("valid reply");
        let expected = r#"[{"hello":"world","anotherKey":"anotherValue","number":1234},"#
            .to_owned()
            + r#"{"hello":"world","anotherKey":"anotherValue","number":1234}]"#;
        assert_eq!(String::from_utf8(json).ok(), Some(expected), "{path}");
    }
}

#[test]
fn paths_parse_and_print() {
    for p in DeserializePath::ALL {
        assert_eq!(p.to_string().parse::<DeserializePath>().ok(), Some(p));
    }
    assert!(matches!(
        "Clone".parse::<DeserializePath>(),
        Err(Error::UnknownPath(_))
    ));
}

#[test]
fn wrong_lengths_and_shapes_are_errors() {
    let reply = encode_reply(1);
    let mut trailing = reply.clone();
    trailing.push(0);
    for bad in [
        &[][..],
        &reply[..4],
        &reply[..reply.len() - 1],
        &trailing[..],
    ] {
        assert!(
            outcomes(bad)
                .iter()
                .all(|r| matches!(r, Err(Error::Length { .. })))
        );
    }
    // A valid document of the wrong shape.
    let docs = encode_documents(1);
    assert!(
        outcomes(&docs)
            .iter()
            .all(|r| matches!(r, Err(Error::Deserialize { .. })))
    );
}

/// Flip, overwrite and truncate bytes of small replies: every path returns (Ok or Err), never panics,
/// and paths that succeed agree.
#[test]
fn mutations_never_panic() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for dataset in Dataset::ALL {
        let base = encode_dataset_reply(dataset, 2);
        for _ in 0..3000 {
            let mut bytes = base.clone();
            for _ in 0..=(next() % 3) {
                let at = (next() % bytes.len() as u64) as usize;
                match next() % 3 {
                    0 => bytes[at] ^= 1 << (next() % 8),
                    1 => bytes[at] = next() as u8,
                    _ => bytes.truncate(at.max(1)),
                }
            }
            let ok: Vec<Outcome> = outcomes(&bytes)
                .into_iter()
                .filter_map(Result::ok)
                .collect();
            assert!(ok.windows(2).all(|w| w[0] == w[1]), "{dataset}: {ok:?}");
        }
    }
}
