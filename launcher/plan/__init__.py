"""Planning: grid expansion, the rules Megatron/DeepSpeed enforce, the memory and step-time estimator, the plan."""
