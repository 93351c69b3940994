"""Consolidation, the sleep cycle of design §4: decay, merging, linking, contradiction
resolution and forgetting.

    schedule    when it is overdue, and what its report says
    cycle       the seven phases in order
    llm_phases  the two phases that ask the LLM: re-summarising topics, contradictions
    heading_naming  the LLM's names for the headings store_memory's placement made"""
