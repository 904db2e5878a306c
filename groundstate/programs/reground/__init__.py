"""ReGround and the collaboration baselines it is compared against (OffQuery paper §4-§6).

``reground`` (Verify, Reconstruct, Resolve and the composed program), ``baseline`` (the stages the baselines
share), ``standard`` (standard collaboration), ``baselines`` (Oracle, Voting, Robin, Manager, Instructor,
SelfReflect), ``turns`` (topologies, speaking order, the opinions agents exchange) and ``builder`` (the LM that
writes misleading evidence for the MediQ builder). They import signatures, ``programs.common`` and records only.
"""
