"""anthropic_messages"""
