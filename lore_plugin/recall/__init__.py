"""The memory engine: from a query to the fragments that answer it, and back into memory.

    memory_base    the engine's connections, embedder and vector index
    memory         recall, explore, traverse, store and topics, with reinforcement
    memory_writes  reconsolidation on recall, storing one fragment, re-embedding
    search         the in-memory vector index and candidate retrieval
    terms          a query's keyword terms and its FTS5 expression
    fusion         one score from cosine and BM25
    dated          fragments whose own text names the time a query asks about
    storing        store_memory and `lore remember`, without copies
    prompt_recall  which fragments match a prompt strongly enough to inject
    prompt_evidence  each candidate answer's evidence: cosine, keyword coverage, rank, depth
    prompt_judge   the decision on that evidence: the answer, or silence
    prompt_replies the note that answers a question a candidate asks: the one after it
    prompt_socket  the private socket on which a running server answers the per-prompt hook
    render         compact text for fragments, trees and topics"""
