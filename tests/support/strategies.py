"""Hypothesis strategies the tests share."""

from __future__ import annotations

from hypothesis import strategies as st

# Surrogates are asked for by name, and only low ones, since a high one before a low one is a
# pair no JSON text keeps apart: every other character is drawn without them (a plain
# st.characters() draws one now and then, a high one included).
surrogate_text = st.lists(
    st.one_of(
        st.characters(exclude_categories=["Cs"]),
        st.characters(min_codepoint=0xDC00, max_codepoint=0xDFFF, categories=["Cs"]),
    ),
    max_size=8,
).map("".join)
