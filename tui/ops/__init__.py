"""Operations on a deployment: flag editing and the safe restart protocol."""
