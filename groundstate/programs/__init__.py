"""dspy.Modules composed from groundstate's signatures."""
