"""The one home of langcodes: language codes to the English names prompts use, and back."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=512)
def language_name(value: str) -> str:
    """``de`` -> ``German``, ``zh`` -> ``Chinese``, ``pt-BR`` -> ``Portuguese (Brazil)``; anything
    that is not a language code (``German``, ``Klingon``) is returned unchanged."""
    text = value.strip()
    if not (2 <= len(text) <= 12) or " " in text or (text[:1].isupper() and len(text) > 3):
        return value
    import langcodes  # loads its tables on first use, not at start-up

    try:
        language = langcodes.Language.get(text)
    except (langcodes.tag_parser.LanguageTagError, ValueError):
        return value
    if not language.is_valid() or language.language is None:
        return value
    name: str = language.display_name("en")
    return name if not name.lower().startswith("unknown") else value


@lru_cache(maxsize=256)
def language_code(language: str) -> str:
    """ISO 639 code of a language name ("German" -> "de") or tag ("zh-Hans" -> "zh"); ``en`` when
    unknown (sentence splitters then apply generic rules, which suit most Latin-script text)."""
    import langcodes

    try:
        return str(langcodes.find(language).language)
    except LookupError:
        pass
    try:
        return str(langcodes.Language.get(language).language or "en")
    except (ValueError, LookupError):
        return "en"
