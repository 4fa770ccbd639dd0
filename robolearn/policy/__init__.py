"""Policies: the network (:mod:`.network`), its metadata (:mod:`.meta`), reading a run's policy
(:mod:`.loading`), the export writer (:mod:`.export`) and the deployment runtime (:mod:`.runtime`,
which imports no torch when ONNX Runtime serves)."""
