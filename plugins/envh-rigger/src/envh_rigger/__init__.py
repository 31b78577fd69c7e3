"""envh-rigger: the designer loop (Observe → Diagnose → Write → Validate).

Given a policy and a benchmark, it writes candidate components (layer specs of any
registered kind), checks them for free (static code check, stage actions against the
tool schemas, a dry run), validates them with fresh rollouts against a numeric target,
and keeps the accepted ones in a content-addressed harness pool.
"""

__version__ = "0.1.0"
