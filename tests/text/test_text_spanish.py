"""Spanish end to end: the second language (decimal comma, thousands period, currency after the amount,
gender and apocopation, D/M dates with cardinals, 24-hour times), and the same rule order as English."""

from __future__ import annotations

import pytest

from ttsbridge.text import TextNormalizer

ES = TextNormalizer(language="es")

CASES = {
    "Tengo 42 manzanas.": "Tengo cuarenta y dos manzanas.",
    "Son 1.234.567 filas.": "Son un millón doscientos treinta y cuatro mil quinientos sesenta y siete filas.",
    "Pi es 3,14 y 3,05.": "Pi es tres coma catorce y tres coma cero cinco.",
    "Su total es 1.234,50 €.": "Su total es mil doscientos treinta y cuatro euros con cincuenta céntimos.",
    "Cuesta 1 € o 21 €.": "Cuesta un euro o veintiún euros.",
    "Pague USD 12 o $5.": "Pague doce dólares o cinco dólares.",
    "Sube un 45 %.": "Sube un cuarenta y cinco por ciento.",
    "Llame al 612 34 56 78.": "Llame al seis uno dos, tres cuatro, cinco seis, siete ocho.",
    "Llame al +34 612 34 56 78.": "Llame al más tres cuatro, seis uno dos, tres cuatro, cinco seis, siete ocho.",
    "Escriba a ayuda@acme.es hoy.": "Escriba a ayuda arroba acme punto e s hoy.",
    "Antes del 12/05.": "Antes del doce de mayo.",
    "El 1 de mayo de 2025.": "El primero de mayo de dos mil veinticinco.",
    "Son las 15:30 o las 9:00.": "Son las quince y treinta o las nueve en punto.",
    "Recorra 1 km, luego 21 km y 3,5 kg.": "Recorra un kilómetro, luego veintiún kilómetros y tres coma cinco kilogramos.",
    "El 1.º y la 2.ª, el 1er piso.": "El primero y la segunda, el primer piso.",
    "Añada 1/2 taza y 3/4 de litro.": "Añada un medio taza y tres cuartos de litro.",
    "De 5-10 días.": "De cinco a diez días.",
    "La API y **el** “mejor” día 🎉.": 'La A P I y el "mejor" día .',
}


@pytest.mark.parametrize(("written", "spoken"), list(CASES.items()), ids=list(range(len(CASES))))
def test_spanish_reads_right(written: str, spoken: str) -> None:
    out = ES.normalize(written)
    assert out.spoken == spoken
    assert out.written == written


def test_the_language_comes_from_the_turn_unless_the_normalizer_names_one() -> None:
    free = TextNormalizer()
    assert free.normalize("Son 5 €.", language="es-ES").spoken == "Son cinco euros."
    assert free.normalize("It is 5 €.").spoken == "It is five euro."
    assert ES.normalize("Son 5 €.", language="en").spoken == "Son cinco euros."


def test_a_regional_tag_picks_the_regions_conventions() -> None:
    mx = TextNormalizer(language="es-MX")
    assert mx.normalize("Cuesta $5.").spoken == "Cuesta cinco pesos."  # "$" is the peso there
    gb = TextNormalizer(language="en-GB")
    assert gb.normalize("By 12/05/2025.").spoken == "By May twelfth, twenty twenty-five."
