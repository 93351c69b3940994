"""Local sentence embeddings (all-MiniLM-L6-v2), fully offline (design §9).

    model_source     where the model's folder comes from, and the checks it passes first
    embedder         the ONNX model and LocalEmbedder; numpy and onnxruntime load lazily
    vector_snapshot  a file copy of a large vector index, so a new server starts fast
    model_files/     the tokenizer files shipped with the plugin (Apache-2.0, see NOTICE)"""
