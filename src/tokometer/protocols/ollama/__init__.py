"""ollama"""
