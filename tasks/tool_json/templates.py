"""Prompt templates for the three categories, each drawing from one ``random.Random``.

Every template builds its prompt, its tool argument and its answer from the
same parameters, and the answer is *computed*, never typed:

* calculator: the answer is the safe evaluator's value of the generated
  expression (:func:`ao_calib_tasks.tool_json.safe_eval.safe_eval`), formatted by
  :func:`format_number`;
* python_exec: the program is assembled from a template, and the answer is
  what it prints, computed in this module by the same Python operations on the
  same values (``str(value)`` is what ``print`` writes). Nothing is executed:
  no ``exec``, no subprocess;
* no_tool: fixed facts and replies written here, asked in several phrasings.

Drawing is deterministic: the same ``rng`` state gives the same example.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .safe_eval import safe_eval


@dataclass(frozen=True)
class Example:
    """One generated example, before it gets an id and the other row fields."""

    category: str
    prompt: str
    tool_args: dict[str, str] | None
    expected_answer: str


def format_number(value: int | float) -> str:
    """Exact digits for ints and integral floats below 1e15; otherwise 12 significant digits ("0.3", not
    "0.30000000000000004")."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12g}"


def _money(rng: random.Random, lo: float, hi: float, step: int = 5) -> str:
    """A price between lo and hi dollars, in cents that are multiples of ``step``, always with two decimals."""
    cents = rng.randrange(int(lo * 100), int(hi * 100) + 1, step)
    return f"{cents / 100:.2f}"


def _pick(rng: random.Random, options: list[str] | tuple[str, ...], **fields: Any) -> str:
    return rng.choice(options).format(**fields)


# ------------------------------------------------------------------------------------------ calculator

ITEMS = [("notebook", "notebooks"), ("apple", "apples"), ("coffee", "coffees"), ("pen", "pens"),
         ("sandwich", "sandwiches"), ("movie ticket", "movie tickets"), ("T-shirt", "T-shirts"),
         ("bag of rice", "bags of rice"), ("light bulb", "light bulbs"), ("bottle of water", "bottles of water"),
         ("pizza", "pizzas"), ("candle", "candles"), ("bus pass", "bus passes"), ("croissant", "croissants"),
         ("pack of batteries", "packs of batteries"), ("houseplant", "houseplants"), ("mug", "mugs"),
         ("pair of socks", "pairs of socks"), ("loaf of bread", "loaves of bread"),
         ("carton of eggs", "cartons of eggs")]
THINGS = ["jacket", "laptop", "pair of running shoes", "backpack", "coffee machine", "desk lamp", "bicycle",
          "winter coat", "blender", "phone case", "office chair", "suitcase"]

CalcTemplate = Callable[[random.Random], tuple[str, str]]


def _shopping_total(rng: random.Random) -> tuple[str, str]:
    (_, a), (_, b) = rng.sample(ITEMS, 2)
    q1, q2 = rng.randint(2, 12), rng.randint(2, 9)
    p1, p2 = _money(rng, 0.5, 25), _money(rng, 0.5, 40)
    prompt = _pick(rng, [
        "I bought {q1} {a} at ${p1} each and {q2} {b} at ${p2} each. How much did I spend in total?",
        "What's the total cost of {q1} {a} at ${p1} apiece plus {q2} {b} at ${p2} apiece?",
        "At the shop, {a} cost ${p1} each and {b} cost ${p2} each. How much do {q1} {a} and {q2} {b} cost "
        "altogether?",
        "My receipt lists {q1} {a} (${p1} each) and {q2} {b} (${p2} each). What should the total be?",
    ], q1=q1, q2=q2, a=a, b=b, p1=p1, p2=p2)
    return prompt, f"{q1} * {p1} + {q2} * {p2}"


def _shopping_with_tax(rng: random.Random) -> tuple[str, str]:
    _, items = rng.choice(ITEMS)
    q, p, t = rng.randint(2, 15), _money(rng, 1, 60), rng.choice([5, 6, 7, 7.5, 8, 8.25, 9, 10, 12, 20])
    prompt = _pick(rng, [
        "I'm buying {q} {items} at ${p} each, plus {t}% sales tax. What's the total?",
        "{q} {items} cost ${p} each before a {t}% tax. How much is the bill including tax?",
    ], q=q, items=items, p=p, t=t)
    return prompt, f"{q} * {p} * (1 + {t} / 100)"


def _unit_price(rng: random.Random) -> tuple[str, str]:
    item, items = rng.choice(ITEMS)
    n, total = rng.randint(2, 48), _money(rng, 2, 120)
    prompt = _pick(rng, [
        "A pack of {n} {items} costs ${total}. What is the price per {item}?",
        "{n} {items} cost ${total} in total. How much is one {item}?",
        "If ${total} buys {n} {items}, what's the unit price?",
    ], n=n, items=items, item=item, total=total)
    return prompt, f"{total} / {n}"


def _percent_of(rng: random.Random) -> tuple[str, str]:
    p, x = rng.choice([3, 5, 12, 15, 17.5, 20, 25, 33, 40, 62.5, 75, 110, 150]), rng.randint(20, 20000)
    prompt = _pick(rng, ["What is {p}% of {x}?", "Calculate {p} percent of {x}.", "How much is {p}% of {x}?",
                         "Find {p}% of {x}."], p=p, x=x)
    return prompt, f"{x} * {p} / 100"


def _discount(rng: random.Random) -> tuple[str, str]:
    thing, price, p = rng.choice(THINGS), _money(rng, 15, 900, 100), rng.choice([10, 15, 20, 25, 30, 35, 40, 50, 60])
    prompt = _pick(rng, [
        "A {thing} normally costs ${price}. It's {p}% off today. What's the sale price?",
        "The {thing} I want is ${price}, and there's a {p}% discount. How much will I pay?",
        "What does a ${price} {thing} cost after a {p}% discount?",
    ], thing=thing, price=price, p=p)
    return prompt, f"{price} * (1 - {p} / 100)"


def _tip(rng: random.Random) -> tuple[str, str]:
    bill, p = _money(rng, 12, 350), rng.choice([10, 12, 15, 18, 20, 22, 25])
    prompt = _pick(rng, ["Our restaurant bill came to ${bill}. How much is a {p}% tip?",
                         "What's a {p}% tip on a ${bill} bill?",
                         "I want to leave {p}% on a ${bill} check. How much is the tip?"], bill=bill, p=p)
    return prompt, f"{bill} * {p} / 100"


def _split_bill(rng: random.Random) -> tuple[str, str]:
    bill, p, n = _money(rng, 30, 600), rng.choice([10, 15, 18, 20]), rng.randint(2, 9)
    prompt = _pick(rng, [
        "{n} friends split a ${bill} dinner bill equally, with a {p}% tip added on top. How much does each "
        "person pay?",
        "The bill is ${bill}. We add a {p}% tip and divide it among {n} people. What's each share?",
    ], n=n, bill=bill, p=p)
    return prompt, f"{bill} * (1 + {p} / 100) / {n}"


def _percent_change(rng: random.Random) -> tuple[str, str]:
    a, b = _money(rng, 5, 500, 100), _money(rng, 5, 500, 100)
    if a == b:
        b = f"{float(b) + 1:.2f}"
    prompt = _pick(rng, ["The price went from ${a} to ${b}. What is the percentage change?",
                         "A stock moved from {a} to {b}. By what percent did it change?"], a=a, b=b)
    return prompt, f"({b} - {a}) / {a} * 100"


def _compound_interest(rng: random.Random) -> tuple[str, str]:
    principal = rng.choice([500, 1000, 1500, 2000, 2500, 5000, 10000, 25000])
    r = rng.choice([1.5, 2, 3, 3.5, 4, 5, 6, 7, 8])
    if rng.random() < 0.6:
        n = rng.randint(2, 30)
        prompt = _pick(rng, [
            "If I invest ${P} at {r}% annual interest compounded yearly, how much will I have after {n} years?",
            "What is ${P} worth after {n} years at {r}% interest per year, compounded annually?",
            "A savings account pays {r}% a year, compounded annually. Starting with ${P}, what's the balance "
            "after {n} years?",
        ], P=principal, r=r, n=n)
        return prompt, f"{principal} * (1 + {r} / 100) ** {n}"
    n = rng.randint(1, 8)
    prompt = _pick(rng, [
        "I deposit ${P} at {r}% annual interest compounded monthly. What's the balance after {n} years?",
        "How much does ${P} grow to in {n} years at {r}% per year, compounded monthly?",
    ], P=principal, r=r, n=n)
    return prompt, f"{principal} * (1 + {r} / 100 / 12) ** {12 * n}"


def _simple_interest(rng: random.Random) -> tuple[str, str]:
    principal, r, n = rng.randint(2, 200) * 50, rng.choice([2, 2.5, 3, 4, 4.5, 5, 6]), rng.randint(1, 10)
    prompt = _pick(rng, ["How much simple interest does ${P} earn at {r}% per year over {n} years?",
                         "What is the simple interest on a ${P} loan at {r}% a year for {n} years?"],
                   P=principal, r=r, n=n)
    return prompt, f"{principal} * {r} / 100 * {n}"


def _area(rng: random.Random) -> tuple[str, str]:
    shape = rng.choice(["rectangle", "circle", "triangle", "trapezoid"])
    if shape == "rectangle":
        length, width = rng.choice([rng.randint(2, 40), round(rng.uniform(2, 30), 1)]), rng.randint(2, 25)
        prompt = _pick(rng, ["A room is {l} m by {w} m. What is its floor area in square meters?",
                             "What is the area of a rectangle {l} cm long and {w} cm wide?",
                             "My garden plot measures {l} ft by {w} ft. How many square feet is that?"],
                       l=length, w=width)
        return prompt, f"{length} * {width}"
    if shape == "circle":
        r = rng.choice([rng.randint(1, 30), round(rng.uniform(0.5, 12), 1)])
        prompt = _pick(rng, ["What is the area of a circle with radius {r} cm? Use 3.14159 for pi.",
                             "A round table has a radius of {r} ft. Using pi = 3.14159, what is its area?"], r=r)
        return prompt, f"3.14159 * {r} ** 2"
    if shape == "triangle":
        b, h = rng.randint(2, 50), rng.randint(2, 40)
        prompt = _pick(rng, ["What is the area of a triangle with base {b} m and height {h} m?",
                             "A triangular sail has a base of {b} ft and a height of {h} ft. What is its area?"],
                       b=b, h=h)
        return prompt, f"0.5 * {b} * {h}"
    a, b, h = rng.randint(3, 30), rng.randint(3, 30), rng.randint(2, 20)
    prompt = f"A trapezoid has parallel sides of {a} cm and {b} cm and a height of {h} cm. What is its area?"
    return prompt, f"({a} + {b}) / 2 * {h}"


def _travel(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.5:
        d, t = rng.randint(20, 900), rng.choice([0.5, 1.5, 2, 2.5, 3, 4, 4.5, 6, 7.5])
        prompt = _pick(rng, ["A car travels {d} km in {t} hours. What is its average speed in km/h?",
                             "I cycled {d} km in {t} hours. What was my average speed?"], d=d, t=t)
        return prompt, f"{d} / {t}"
    use, d = rng.choice([4.5, 5.2, 6, 6.8, 7.5, 8.1, 9.4, 11]), rng.randint(40, 1200)
    prompt = _pick(rng, ["My car uses {u} liters of fuel per 100 km. How many liters do I need for a {d} km "
                         "trip?",
                         "At {u} L/100km, how much fuel does a {d} km drive take?"], u=use, d=d)
    return prompt, f"{use} * {d} / 100"


def _temperature(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.5:
        c = rng.choice([rng.randint(-40, 45), round(rng.uniform(-20, 40), 1) + 0.0])  # + 0.0: no "-0.0"
        prompt = _pick(rng, ["Convert {c} degrees Celsius to Fahrenheit.", "What is {c}°C in °F?"], c=c)
        return prompt, f"{c} * 9 / 5 + 32"
    f = rng.randint(-20, 110)
    prompt = _pick(rng, ["Convert {f} degrees Fahrenheit to Celsius.", "What is {f}°F in Celsius?"], f=f)
    return prompt, f"({f} - 32) * 5 / 9"


def _average(rng: random.Random) -> tuple[str, str]:
    values = [rng.randint(40, 100) for _ in range(rng.randint(3, 6))]
    shown = ", ".join(map(str, values[:-1])) + f" and {values[-1]}"
    prompt = _pick(rng, ["What's the average of {v}?", "My test scores were {v}. What is my mean score?",
                         "Find the mean of {v}."], v=shown)
    return prompt, "(" + " + ".join(map(str, values)) + f") / {len(values)}"


def _wage(rng: random.Random) -> tuple[str, str]:
    w, h, o = _money(rng, 12, 60, 25), rng.randint(20, 40), rng.randint(1, 12)
    prompt = _pick(rng, [
        "I earn ${w} per hour. This week I worked {h} regular hours plus {o} overtime hours paid at 1.5 times "
        "the rate. What did I earn?",
        "At ${w} an hour with time-and-a-half for overtime, what is the pay for {h} regular and {o} overtime "
        "hours?",
    ], w=w, h=h, o=o)
    return prompt, f"{w} * {h} + {w} * 1.5 * {o}"


def _recipe(rng: random.Random) -> tuple[str, str]:
    s, t = rng.randint(2, 8), rng.randint(2, 20)
    if s == t:
        t += 1
    grams, ingredient = rng.randint(50, 900), rng.choice(["flour", "sugar", "butter", "rice", "pasta", "oats"])
    prompt = (f"A recipe for {s} servings needs {grams} grams of {ingredient}. How many grams do I need for "
              f"{t} servings?")
    return prompt, f"{grams} / {s} * {t}"


def _bare_expression(rng: random.Random) -> tuple[str, str]:
    """A bare arithmetic expression of one of several shapes, shown with varied notation."""
    a, b, c, d, e = (rng.randint(2, 99) for _ in range(5))
    x, y = round(rng.uniform(0.5, 99), 2), round(rng.uniform(0.5, 50), 2)
    shape = rng.randrange(12)
    if shape == 0:
        expr = f"({a} + {b}) * ({c} - {d})"
    elif shape == 1:
        expr = f"(({a} + {b}) * {c} - {d}) / {e}"
    elif shape == 2:
        expr = f"{rng.randint(2, 15)} ** {rng.randint(2, 6)} + {b}"
    elif shape == 3:
        expr = f"{rng.randint(100, 99999)} / {rng.randint(2, 250)}"
    elif shape == 4:
        expr = f"{x} * {y} - {round(rng.uniform(0.1, 20), 2)}"
    elif shape == 5:
        expr = f"-{a} + {b} * {c}"
    elif shape == 6:
        expr = f"{a} * ({b} + {c} * ({d} - {e}))"
    elif shape == 7:
        expr = f"({a} - {b}) ** 2 / {c}"
    elif shape == 8:
        expr = f"{x} / ({y} + {a})"
    elif shape == 9:
        expr = f"{rng.randint(2, 9)} ** -{rng.randint(1, 4)} * {rng.randint(100, 5000)}"
    elif shape == 10:
        n, m = rng.randint(100, 99999), rng.randint(2, 97)
        if rng.random() < 0.5:
            prompt = _pick(rng, ["What is the remainder when {n} is divided by {m}?", "What is {n} mod {m}?"],
                           n=n, m=m)
            return prompt, f"{n} % {m}"
        prompt = _pick(rng, ["How many whole times does {m} go into {n}?", "What is {n} divided by {m}, rounded "
                             "down to a whole number?"], n=n, m=m)
        return prompt, f"{n} // {m}"
    else:
        n = rng.choice([rng.randint(2, 40) ** 2, rng.randint(2, 5000)])
        prompt = _pick(rng, ["What is the square root of {n}?", "Calculate the square root of {n}."], n=n)
        return prompt, f"{n} ** 0.5"
    shown = expr
    style = rng.random()
    if style < 0.25:
        shown = expr.replace(" ** ", "^").replace(" * ", " × ").replace(" / ", " ÷ ")
    elif style < 0.4:
        shown = expr.replace(" ", "")
    prompt = _pick(rng, ["What is {e}?", "Calculate {e}.", "Evaluate {e}", "Compute: {e}", "{e} = ?",
                         "Can you work out {e} for me?", "Please calculate {e}", "Solve {e}."], e=shown)
    return prompt, expr


CALCULATOR_TEMPLATES: list[CalcTemplate] = [
    _shopping_total, _shopping_with_tax, _unit_price, _percent_of, _discount, _tip, _split_bill, _percent_change,
    _compound_interest, _simple_interest, _area, _travel, _temperature, _average, _wage, _recipe,
    _bare_expression, _bare_expression, _bare_expression, _bare_expression,
]


def calculator_example(rng: random.Random) -> Example:
    """A word problem or bare expression; the answer is the safe evaluator's value of the expression."""
    for _ in range(100):
        prompt, expression = rng.choice(CALCULATOR_TEMPLATES)(rng)
        value = safe_eval(expression)
        if value is not None:
            return Example("calculator", prompt, {"expression": expression}, format_number(value))
    raise RuntimeError("calculator templates keep producing expressions that do not evaluate")  # pragma: no cover


# --------------------------------------------------------------------------------------------- python

WORDS = ["banana", "keyboard", "elephant", "python", "mississippi", "calendar", "umbrella", "strawberry",
         "notebook", "galaxy", "bicycle", "volcano", "penguin", "orchestra", "labyrinth", "racecar", "level",
         "rotator", "kayak", "window", "mountain", "chocolate", "algorithm", "dinosaur", "refer", "abracadabra",
         "bookkeeper", "parallel", "committee", "noon", "civic", "lighthouse", "butterfly", "tomato", "giraffe"]
SENTENCES = ["The quick brown fox jumps over the lazy dog", "Practice makes perfect", "To be or not to be",
             "A journey of a thousand miles begins with a single step", "Data science is fun",
             "Never stop learning new things", "The rain in Spain stays mainly in the plain",
             "All that glitters is not gold", "Every cloud has a silver lining", "Knowledge is power",
             "Time flies like an arrow", "Actions speak louder than words", "Better late than never",
             "Fortune favors the bold", "Python makes programming enjoyable", "She sells seashells by the seashore",
             "Where there is a will there is a way", "Early birds catch the worm", "Rome was not built in a day",
             "Simple is better than complex", "Readability counts more than cleverness",
             "Machine learning models need good data", "Keep your friends close and your books closer"]

PyTemplate = Callable[[random.Random], tuple[str, str, Any]]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _nums(rng: random.Random, lo: int = 1, hi: int = 99) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(5, 10))]


def _is_prime(p: int) -> bool:
    return all(p % d for d in range(2, int(p**0.5) + 1))


def _reverse_string(rng: random.Random) -> tuple[str, str, Any]:
    w = rng.choice(WORDS + SENTENCES)
    prompt = _pick(rng, ['Write Python code to reverse the string "{w}".', 'Use Python to reverse "{w}".',
                         'Run a program that prints "{w}" backwards.'], w=w)
    return prompt, f"print({w!r}[::-1])", w[::-1]


def _count_vowels(rng: random.Random) -> tuple[str, str, Any]:
    s = rng.choice(SENTENCES + WORDS)
    prompt = _pick(rng, ['Write a Python program that counts the vowels in "{s}".',
                         'How many vowels (a, e, i, o, u) are in "{s}"? Count them with code.'], s=s)
    code = f'text = {s!r}\nprint(sum(1 for ch in text.lower() if ch in "aeiou"))'
    return prompt, code, sum(1 for ch in s.lower() if ch in "aeiou")


def _count_char(rng: random.Random) -> tuple[str, str, Any]:
    s = rng.choice(SENTENCES + WORDS)
    c = rng.choice(sorted(set(s.lower()) - {" "}))
    prompt = _pick(rng, ["Use Python to count how many times the letter '{c}' appears in \"{s}\" (ignoring case).",
                         "Write code that counts the occurrences of '{c}' in \"{s}\", case-insensitively."],
                   c=c, s=s)
    return prompt, f"print({s!r}.lower().count({c!r}))", s.lower().count(c)


def _sort_list(rng: random.Random) -> tuple[str, str, Any]:
    nums = _nums(rng, -50, 200)
    if rng.random() < 0.5:
        prompt = _pick(rng, ["Write Python code to sort the list {n} in ascending order.",
                             "Use Python to sort {n} from smallest to largest."], n=nums)
        return prompt, f"print(sorted({nums}))", sorted(nums)
    prompt = _pick(rng, ["Write Python code to sort {n} in descending order.",
                         "Sort the list {n} from largest to smallest using Python."], n=nums)
    return prompt, f"print(sorted({nums}, reverse=True))", sorted(nums, reverse=True)


def _fibonacci(rng: random.Random) -> tuple[str, str, Any]:
    if rng.random() < 0.6:
        n = rng.randint(5, 80)
        prompt = _pick(rng, ["Write a Python loop to compute the {o} Fibonacci number, with F(0) = 0 and F(1) = 1.",
                             "Use Python to find F({n}) in the Fibonacci sequence starting F(0) = 0, F(1) = 1."],
                       o=_ordinal(n), n=n)
        code = f"a, b = 0, 1\nfor _ in range({n}):\n    a, b = b, a + b\nprint(a)"
        a, b = 0, 1
        for _ in range(n):
            a, b = b, a + b
        return prompt, code, a
    n = rng.randint(5, 25)
    prompt = _pick(rng, ["Write Python code that prints the first {n} Fibonacci numbers as a list, starting 0, 1.",
                         "Generate a list of the first {n} Fibonacci numbers (0, 1, 1, 2, ...) with Python."], n=n)
    code = f"fib = [0, 1]\nwhile len(fib) < {n}:\n    fib.append(fib[-1] + fib[-2])\nprint(fib[:{n}])"
    fib = [0, 1]
    while len(fib) < n:
        fib.append(fib[-1] + fib[-2])
    return prompt, code, fib[:n]


def _factorial(rng: random.Random) -> tuple[str, str, Any]:
    n = rng.randint(5, 30)
    prompt = _pick(rng, ["Write a Python program that computes {n} factorial with a loop.",
                         "Use Python to calculate {n}! using a for loop."], n=n)
    code = f"result = 1\nfor i in range(2, {n} + 1):\n    result *= i\nprint(result)"
    return prompt, code, math.factorial(n)


def _sum_of_squares(rng: random.Random) -> tuple[str, str, Any]:
    n = rng.randint(5, 500)
    prompt = _pick(rng, ["Write Python code to sum the squares of the integers from 1 to {n}.",
                         "Use a Python generator expression to add up i*i for i from 1 to {n}."], n=n)
    return prompt, f"print(sum(i * i for i in range(1, {n} + 1)))", sum(i * i for i in range(1, n + 1))


def _primes(rng: random.Random) -> tuple[str, str, Any]:
    n = rng.randint(15, 120)
    primes = [p for p in range(2, n) if _is_prime(p)]
    comprehension = f"[p for p in range(2, {n}) if all(p % d for d in range(2, int(p ** 0.5) + 1))]"
    if rng.random() < 0.5:
        prompt = _pick(rng, ["Write Python code that lists all prime numbers below {n}.",
                             "Use Python to print every prime less than {n}."], n=n)
        return prompt, f"print({comprehension})", primes
    prompt = _pick(rng, ["Write a Python program that counts the prime numbers below {n}.",
                         "How many primes are there under {n}? Compute it with Python."], n=n)
    return prompt, f"print(len({comprehension}))", len(primes)


def _word_stats(rng: random.Random) -> tuple[str, str, Any]:
    s = rng.choice(SENTENCES)
    kind = rng.randrange(5)
    if kind == 0:
        prompt = _pick(rng, ['Use Python to count the words in "{s}".',
                             'Write code that prints how many words "{s}" has.'], s=s)
        return prompt, f"print(len({s!r}.split()))", len(s.split())
    if kind == 1:
        prompt = _pick(rng, ['Write Python code that converts "{s}" to uppercase.',
                             'Use Python to print "{s}" in all caps.'], s=s)
        return prompt, f"print({s!r}.upper())", s.upper()
    if kind == 2:
        prompt = _pick(rng, ['Use Python to reverse the order of the words in "{s}".',
                             'Write code that prints the words of "{s}" in reverse order.'], s=s)
        return prompt, f'print(" ".join(reversed({s!r}.split())))', " ".join(reversed(s.split()))
    if kind == 3:
        prompt = _pick(rng, ['Write Python code that builds an acronym from the first letters of "{s}".',
                             'Use Python to make an uppercase acronym of "{s}".'], s=s)
        return (prompt, f'print("".join(w[0].upper() for w in {s!r}.split()))',
                "".join(w[0].upper() for w in s.split()))
    k = rng.randint(3, 6)
    prompt = _pick(rng, ['Use Python to list the words in "{s}" that are longer than {k} letters.',
                         'Write code that prints every word of "{s}" with more than {k} characters.'], s=s, k=k)
    return prompt, f"print([w for w in {s!r}.split() if len(w) > {k}])", [w for w in s.split() if len(w) > k]


def _palindrome(rng: random.Random) -> tuple[str, str, Any]:
    w = rng.choice(WORDS)
    prompt = _pick(rng, ['Write Python code to check whether "{w}" is a palindrome.',
                         'Use Python to test if "{w}" reads the same backwards.'], w=w)
    return prompt, f"s = {w!r}\nprint(s == s[::-1])", w == w[::-1]


def _list_ops(rng: random.Random) -> tuple[str, str, Any]:
    nums = [*_nums(rng, 1, 15), rng.randint(1, 15)]
    kind = rng.randrange(7)
    if kind == 0:
        prompt = _pick(rng, ["Use Python to get the sorted unique values of {n}.",
                             "Write code that removes duplicates from {n} and sorts the result."], n=nums)
        return prompt, f"print(sorted(set({nums})))", sorted(set(nums))
    if kind == 1:
        prompt = _pick(rng, ["Write Python code that removes duplicates from {n} while keeping the original order.",
                             "Use Python to deduplicate {n}, preserving first occurrences."], n=nums)
        return prompt, f"print(list(dict.fromkeys({nums})))", list(dict.fromkeys(nums))
    if kind == 2:
        prompt = _pick(rng, ["Use Python to find the second largest distinct value in {n}.",
                             "Write code that prints the second-highest unique number in {n}."], n=nums)
        return prompt, f"print(sorted(set({nums}))[-2])", sorted(set(nums))[-2]
    if kind == 3:
        prompt = _pick(rng, ["Write Python code to keep only the even numbers from {n}.",
                             "Use a list comprehension to filter the even numbers out of {n}."], n=nums)
        return prompt, f"print([x for x in {nums} if x % 2 == 0])", [x for x in nums if x % 2 == 0]
    if kind == 4:
        prompt = _pick(rng, ["Write a Python loop that prints the running totals of {n} as a list.",
                             "Use Python to compute the cumulative sums of {n}."], n=nums)
        code = f"total = 0\nrunning = []\nfor x in {nums}:\n    total += x\n    running.append(total)\nprint(running)"
        running, total = [], 0
        for x in nums:
            total += x
            running.append(total)
        return prompt, code, running
    if kind == 5:
        prompt = _pick(rng, ["Use Python to compute the mean of {n}.",
                             "Write code that prints the average of the numbers in {n}."], n=nums)
        return prompt, f"nums = {nums}\nprint(sum(nums) / len(nums))", sum(nums) / len(nums)
    value = rng.choice(nums)
    prompt = _pick(rng, ["Write Python code that counts how many times {v} appears in {n}.",
                         "Use Python to count the occurrences of {v} in {n}."], v=value, n=nums)
    return prompt, f"print({nums}.count({value}))", nums.count(value)


def _number_ops(rng: random.Random) -> tuple[str, str, Any]:
    kind = rng.randrange(6)
    if kind == 0:
        n = rng.randint(10**5, 10**12)
        prompt = _pick(rng, ["Write Python code that adds up the digits of {n}.",
                             "Use Python to compute the digit sum of {n}."], n=n)
        return prompt, f"print(sum(int(d) for d in str({n})))", sum(int(d) for d in str(n))
    if kind == 1:
        start = rng.randint(3, 300)
        prompt = _pick(rng, ["Write a Python program that counts the Collatz steps for {n} to reach 1.",
                             "Use Python to find how many steps the Collatz sequence starting at {n} takes to "
                             "reach 1."], n=start)
        code = (f"n = {start}\nsteps = 0\nwhile n != 1:\n    n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
                f"    steps += 1\nprint(steps)")
        n, steps = start, 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        return prompt, code, steps
    if kind == 2:
        a, b = rng.randint(12, 5000), rng.randint(12, 5000)
        prompt = _pick(rng, ["Write Python code that finds the greatest common divisor of {a} and {b} with "
                             "Euclid's algorithm.",
                             "Use a while loop in Python to compute gcd({a}, {b})."], a=a, b=b)
        return prompt, f"a, b = {a}, {b}\nwhile b:\n    a, b = b, a % b\nprint(a)", math.gcd(a, b)
    if kind == 3:
        n = rng.randint(2, 100000)
        prompt = _pick(rng, ["Use Python to convert {n} to binary (without the 0b prefix).",
                             "Write code that prints the binary representation of {n}."], n=n)
        return prompt, f"print(bin({n})[2:])", bin(n)[2:]
    if kind == 4:
        n = rng.randint(10, 2000)
        prompt = _pick(rng, ["Write Python code to sum all numbers below {n} that are multiples of 3 or 5.",
                             "Use Python to add up the multiples of 3 or 5 less than {n}."], n=n)
        return (prompt, f"print(sum(x for x in range({n}) if x % 3 == 0 or x % 5 == 0))",
                sum(x for x in range(n) if x % 3 == 0 or x % 5 == 0))
    n = rng.randint(4, 15)
    prompt = _pick(rng, ["Write Python code that lists the squares of 1 through {n}.",
                         "Use a list comprehension to print the squares from 1 to {n}."], n=n)
    return prompt, f"print([x ** 2 for x in range(1, {n} + 1)])", [x**2 for x in range(1, n + 1)]


def _text_ops(rng: random.Random) -> tuple[str, str, Any]:
    kind = rng.randrange(3)
    if kind == 0:
        w = rng.choice(WORDS)
        prompt = _pick(rng, ['Use Python\'s Counter to find the most common letter in "{w}".',
                             'Write code that prints the most frequent character in "{w}".'], w=w)
        return (prompt, f"from collections import Counter\nprint(Counter({w!r}).most_common(1)[0][0])",
                Counter(w).most_common(1)[0][0])
    words = rng.sample(WORDS, rng.randint(3, 6))
    if kind == 1:
        sep = rng.choice(["-", ", ", "_", " | "])
        prompt = _pick(rng, ['Write Python code that joins {w} with "{sep}".',
                             'Use Python to join the words {w} using the separator "{sep}".'], w=words, sep=sep)
        return prompt, f"print({sep!r}.join({words}))", sep.join(words)
    prompt = _pick(rng, ["Use a dict comprehension in Python to map each word in {w} to its length.",
                         "Write Python code that builds a dictionary of word lengths for {w}."], w=words)
    return prompt, f"print({{w: len(w) for w in {words}}})", {w: len(w) for w in words}


PYTHON_TEMPLATES: list[PyTemplate] = [
    _reverse_string, _count_vowels, _count_char, _sort_list, _fibonacci, _factorial, _sum_of_squares, _primes,
    _word_stats, _word_stats, _palindrome, _list_ops, _list_ops, _number_ops, _number_ops, _text_ops,
]


def python_example(rng: random.Random) -> Example:
    """A small program that prints its answer; the answer is ``str`` of the value computed alongside it."""
    prompt, code, value = rng.choice(PYTHON_TEMPLATES)(rng)
    return Example("python_exec", prompt, {"code": code}, str(value))


# -------------------------------------------------------------------------------------------- no_tool

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Australia": "Canberra", "Canada": "Ottawa", "Brazil": "Brasília",
            "Egypt": "Cairo", "Kenya": "Nairobi", "Germany": "Berlin", "Italy": "Rome", "Spain": "Madrid",
            "India": "New Delhi", "China": "Beijing", "Mexico": "Mexico City", "Argentina": "Buenos Aires",
            "Norway": "Oslo", "Sweden": "Stockholm", "Portugal": "Lisbon", "Turkey": "Ankara",
            "South Korea": "Seoul", "Thailand": "Bangkok", "Peru": "Lima", "Nigeria": "Abuja",
            "New Zealand": "Wellington", "Poland": "Warsaw", "Greece": "Athens", "Ireland": "Dublin",
            "Vietnam": "Hanoi", "Chile": "Santiago", "Morocco": "Rabat", "Switzerland": "Bern"}
AUTHORS = {"Pride and Prejudice": "Jane Austen", "1984": "George Orwell", "To Kill a Mockingbird": "Harper Lee",
           "Hamlet": "William Shakespeare", "The Great Gatsby": "F. Scott Fitzgerald",
           "Moby-Dick": "Herman Melville", "War and Peace": "Leo Tolstoy", "One Hundred Years of Solitude":
           "Gabriel García Márquez", "The Hobbit": "J. R. R. Tolkien", "Don Quixote": "Miguel de Cervantes",
           "Frankenstein": "Mary Shelley", "The Origin of Species": "Charles Darwin",
           "Crime and Punishment": "Fyodor Dostoevsky", "Beloved": "Toni Morrison", "Dracula": "Bram Stoker"}
FACTS = [("What is the chemical symbol for gold?", "Au"), ("What is the chemical symbol for sodium?", "Na"),
         ("Which planet is known as the Red Planet?", "Mars"),
         ("What is the largest planet in our solar system?", "Jupiter"),
         ("What gas do plants absorb from the air for photosynthesis?", "Carbon dioxide"),
         ("What is the boiling point of water at sea level in Celsius?", "100 degrees Celsius"),
         ("How many legs does a spider have?", "8"), ("What is the largest ocean on Earth?", "The Pacific Ocean"),
         ("Who painted the Mona Lisa?", "Leonardo da Vinci"), ("In which year did World War II end?", "1945"),
         ("What is the hardest natural substance?", "Diamond"),
         ("Who developed the theory of general relativity?", "Albert Einstein"),
         ("What is the longest river in Africa?", "The Nile"), ("How many days are in a leap year?", "366"),
         ("What language is mainly spoken in Brazil?", "Portuguese"), ("What is the currency of Japan?", "The yen"),
         ("Which element has atomic number 1?", "Hydrogen"), ("How many continents are there?", "7"),
         ("What is the tallest mountain in the world?", "Mount Everest"),
         ("Who was the first person to walk on the Moon?", "Neil Armstrong"),
         ("What is the largest mammal?", "The blue whale"), ("How many strings does a standard guitar have?", "6"),
         ("What organ pumps blood through the human body?", "The heart"),
         ("Which country gifted the Statue of Liberty to the United States?", "France"),
         ("What is the main ingredient in guacamole?", "Avocado")]
DEFINITIONS = [("What does CPU stand for?", "Central Processing Unit"),
               ("What does HTML stand for?", "HyperText Markup Language"),
               ("What does NASA stand for?", "National Aeronautics and Space Administration"),
               ("What does DNA stand for?", "Deoxyribonucleic acid"),
               ("What is the plural of 'mouse'?", "Mice"), ("What is the opposite of 'ancient'?", "Modern"),
               ("What is a haiku?", "A short Japanese poem of three lines with five, seven and five syllables."),
               ("What is an API?", "A set of rules that lets programs communicate with each other."),
               ("What is a prime number?", "A whole number greater than 1 whose only divisors are 1 and itself."),
               ("Define photosynthesis in one sentence.",
                "Photosynthesis is how plants use sunlight, water and carbon dioxide to make sugar and oxygen."),
               ("What is a noun?", "A word that names a person, place, thing or idea."),
               ("What is gravity?", "The force by which masses attract one another."),
               ("What is an idiom?", "A phrase whose meaning differs from the literal meaning of its words."),
               ("What is a verb?", "A word that describes an action, state or occurrence."),
               ("What is machine learning?", "A field of AI in which systems learn patterns from data.")]
CONVERSATION = [("Hello!", "Hello! How can I help you today?"), ("Hi there", "Hi! How can I help you today?"),
                ("Good morning!", "Good morning! How can I help you today?"),
                ("Thank you so much!", "You're welcome! Let me know if you need anything else."),
                ("Thanks for your help.", "You're welcome! Let me know if you need anything else."),
                ("How are you?", "I'm doing well, thank you! How can I help you today?"),
                ("What's your name?", "I'm a helpful AI assistant."),
                ("Can you help me with something?", "Of course! What do you need help with?"),
                ("Goodbye!", "Goodbye! Have a great day."),
                ("Tell me a fun fact.", "Honey never spoils: edible honey has been found in ancient Egyptian tombs.")]
PREFIXES = ["", "", "", "Quick question: ", "Hey, ", "I was wondering: ", "Trivia time! ", "Do you know: "]


def _lowered(question: str) -> str:
    return question[0].lower() + question[1:]


def no_tool_example(rng: random.Random) -> Example:
    """A factual or conversational question with a fixed answer, in varied phrasing."""
    kind = rng.choices(["capital", "author", "fact", "definition", "conversation"], weights=[4, 2, 3, 2, 1])[0]
    if kind == "conversation":
        prompt, answer = rng.choice(CONVERSATION)
        return Example("no_tool", prompt, None, answer)
    if kind == "capital":
        country = rng.choice(sorted(CAPITALS))
        question = _pick(rng, ["What is the capital of {c}?", "What's the capital city of {c}?",
                               "Which city is the capital of {c}?", "Name the capital of {c}."], c=country)
        answer = CAPITALS[country]
    elif kind == "author":
        book = rng.choice(sorted(AUTHORS))
        question = _pick(rng, ["Who wrote {b}?", "Who is the author of {b}?", "Which author wrote {b}?"], b=book)
        answer = AUTHORS[book]
    else:
        question, answer = rng.choice(FACTS if kind == "fact" else DEFINITIONS)
    prefix = rng.choice(PREFIXES)
    return Example("no_tool", prefix + (_lowered(question) if prefix.endswith((", ", ": ")) else question), None,
                   answer)


CATEGORY_EXAMPLES: dict[str, Callable[[random.Random], Example]] = {
    "calculator": calculator_example,
    "python_exec": python_example,
    "no_tool": no_tool_example,
}
