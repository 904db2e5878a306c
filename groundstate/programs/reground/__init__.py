"""ReGround and the collaboration baselines it is compared against (OffQuery paper §4-§6).

``reground`` (Verify, Reconstruct, Resolve and the composed program), ``statements`` (statement-level
verification, §E.4: VerifyStatements and its parts), ``baseline`` (the stages the baselines
share), ``standard`` (standard collaboration and its confidence variant), ``oracle`` (the upper bound),
``centralized`` (Manager, Instructor), ``baselines`` (Voting, Robin, SelfReflect, and ``BASELINES``, every
baseline by CLI name), ``turns`` (topologies, speaking order, the opinions agents exchange) and ``builder`` (the
LM that writes misleading evidence for the MediQ builder). They import signatures, ``programs.common`` and records only.
"""
