"""openai_responses"""
