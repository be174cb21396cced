"""Output: figures, the report assets (figures, tables, verdict JSONs) and JSON files.
"""
