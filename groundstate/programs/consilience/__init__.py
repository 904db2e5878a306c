"""Hidden-profile discussions and Consilience (Consilience paper §3-§4): LM agents (``agents``; what their
answers mean, ``answers``), seeded simulated agents (``simulated``; what they conclude ``simulated_belief``, what
they say ``simulated_speech``, their parameters ``simulated_params``, their random streams ``simulated_streams``,
their group's array code ``simulated_group``, per-fact support ``support``), the reference protocols
(``protocols``), the collective state (``state``), controllers and routers (``control``), the controlled
discussion itself (``consilience``) and the travel task builder LM (``travel_builder``).

They import signatures, ``programs.common`` and records only; training and evaluation live on later floors.
"""
