//! Unit tests of `blob`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn parses_file_specs() {
    assert_eq!(
        "file:shares".parse::<StoreSpec>().unwrap(),
        StoreSpec::File("shares".into())
    );
    assert_eq!(
        "file:///srv/shares".parse::<StoreSpec>().unwrap(),
        StoreSpec::File("/srv/shares".into())
    );
    assert_eq!(
        "file://localhost/srv/x".parse::<StoreSpec>().unwrap(),
        StoreSpec::File("/srv/x".into())
    );
    assert_eq!(
        "/var/x".parse::<StoreSpec>().unwrap(),
        StoreSpec::File("/var/x".into())
    );
    assert_eq!(
        "./rel".parse::<StoreSpec>().unwrap(),
        StoreSpec::File("./rel".into())
    );
    assert!(matches!(
        "file://host/x".parse::<StoreSpec>(),
        Err(StoreSpecError::FileHost { .. })
    ));
    assert!(matches!(
        "file:".parse::<StoreSpec>(),
        Err(StoreSpecError::EmptyPath { .. })
    ));
    assert!(matches!(
        "".parse::<StoreSpec>(),
        Err(StoreSpecError::Empty)
    ));
}

#[test]
fn parses_s3_specs() {
    assert_eq!(
        "s3://my-bucket".parse::<StoreSpec>().unwrap(),
        StoreSpec::s3("my-bucket", "")
    );
    assert_eq!(
        "s3://my-bucket/".parse::<StoreSpec>().unwrap(),
        StoreSpec::s3("my-bucket", "")
    );
    assert_eq!(
        "s3://my.bucket/a/b_c/".parse::<StoreSpec>().unwrap(),
        StoreSpec::s3("my.bucket", "a/b_c")
    );
    for bad in ["s3://", "s3:bucket", "s3:/bucket"] {
        assert!(
            matches!(
                bad.parse::<StoreSpec>(),
                Err(StoreSpecError::MalformedS3 { .. })
            ),
            "{bad}"
        );
    }
    for bad in ["s3://Bad_Bucket/x", "s3://ab", "s3://-abc"] {
        assert!(
            matches!(
                bad.parse::<StoreSpec>(),
                Err(StoreSpecError::InvalidBucket { .. })
            ),
            "{bad}"
        );
    }
    for bad in ["s3://bucket/a//b", "s3://bucket/a/../b", "s3://bucket/a b"] {
        assert!(
            matches!(
                bad.parse::<StoreSpec>(),
                Err(StoreSpecError::InvalidPrefix { .. })
            ),
            "{bad}"
        );
    }
    let err = "gs://bucket/x".parse::<StoreSpec>().unwrap_err();
    assert!(matches!(err, StoreSpecError::UnsupportedScheme { .. }));
    assert!(err.to_string().contains("gs://bucket/x"), "{err}");
}

#[test]
fn display_round_trips() {
    for s in ["s3://bucket", "s3://bucket/a/b", "file:/srv/x", "file:rel"] {
        let spec: StoreSpec = s.parse().unwrap();
        assert_eq!(spec.to_string(), s);
        assert_eq!(spec.to_string().parse::<StoreSpec>().unwrap(), spec);
    }
}

#[test]
fn codes() {
    let code = ShareCode::random().unwrap();
    assert!(is_valid_code(code.as_str()));
    assert_ne!(code, ShareCode::random().unwrap());
    assert!(ShareCode::parse("0123456789abcdef0123456789abcdef").is_some());
    for bad in [
        "",
        "0123456789ABCDEF0123456789abcdef",
        "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0",
        "../../../../etc/passwd/aaaaaaaaaaa",
        "0123456789abcdef0123456789abcdeg",
    ] {
        assert!(ShareCode::parse(bad).is_none(), "{bad}");
    }
    assert!(!format!("{code:?}").contains(code.as_str()));
}

#[test]
fn file_store_create_is_exclusive_and_private() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(&dir.path().join("s")).unwrap();
    let path = store.blob_path(&ShareCode::random().unwrap());
    create_atomic(&path, b"one").unwrap();
    assert!(matches!(
        create_atomic(&path, b"two"),
        Err(BlobError::AlreadyExists { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"one");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(store.root()), 0o700);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }
    // No temp files left behind.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1);
}
