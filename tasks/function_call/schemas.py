"""The function library the generator draws from.

Each :class:`Schema` is one callable tool: what the prompt shows the model
(name, description, typed parameters) plus what the generator needs to invent a
query for it (argument samplers and phrasing templates).

Templates are ``str.format`` strings whose fields are argument names. They are
grouped by which *optional* arguments they mention; the rule that keeps answers
unambiguous is that an optional argument appears in the answer iff the query
mentions it. Boolean arguments are written into queries through their
``phrases`` (text for False, text for True).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Sampler = Callable[[random.Random], Any]
PARAM_TYPES = ("int", "float", "str", "list[int]", "list[str]", "bool")


@dataclass(frozen=True)
class Param:
    """One parameter: its prompt text and type, and how to sample a value for it."""

    type: str
    description: str
    sample: Sampler
    optional: bool = False
    default: Any = None
    phrases: tuple[str, str] | None = None  # bools only: how a query says False / True

    def definition(self) -> dict[str, str]:
        """The ``{"description", "type"}`` shape of the row format; optionality goes into the text."""
        text = self.description
        if self.optional:
            text += " Optional" + (f" (default: {self.default})." if self.default is not None else ".")
        return {"description": text, "type": self.type}


@dataclass(frozen=True)
class Schema:
    """A function the model may call, with templates keyed by the optional args they mention."""

    name: str
    description: str
    parameters: dict[str, Param]
    templates: dict[tuple[str, ...], tuple[str, ...]]
    multi_arg: str | None = None  # argument that varies across calls in a multi-call query
    multi_templates: tuple[str, ...] = field(default=())
    # Made-up functions only (synthetic.py): queries that give every call its own arguments. ``openers`` hold
    # ``{calls}`` where the calls go; ``call_phrases`` are one call's words, one per required argument, in order.
    openers: tuple[str, ...] = field(default=())
    call_phrases: tuple[str, ...] = field(default=())

    def definition(self) -> dict[str, Any]:
        """The JSON object shown in the prompt."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {k: p.definition() for k, p in self.parameters.items()},
        }

    @property
    def required(self) -> list[str]:
        return [k for k, p in self.parameters.items() if not p.optional]


def pick(*options: Any) -> Sampler:
    """Sampler choosing uniformly among fixed options."""
    return lambda rng: rng.choice(options)


def ints(lo: int, hi: int) -> Sampler:
    return lambda rng: rng.randint(lo, hi)


def floats(lo: float, hi: float, digits: int = 2) -> Sampler:
    return lambda rng: round(rng.uniform(lo, hi), digits)


def int_lists(lo: int, hi: int, min_len: int = 3, max_len: int = 6) -> Sampler:
    return lambda rng: [rng.randint(lo, hi) for _ in range(rng.randint(min_len, max_len))]


def str_lists(pool: tuple[str, ...], min_len: int = 2, max_len: int = 4) -> Sampler:
    return lambda rng: rng.sample(pool, rng.randint(min_len, max_len))


def flag() -> Sampler:
    return lambda rng: rng.random() < 0.5


CITIES = ("Paris", "Tokyo", "New York", "London", "Berlin", "Sydney", "Toronto", "Madrid", "Cairo", "Seoul", "Lima", "Oslo")
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF", "INR")
PHRASES = ("hello world", "good morning", "open the door", "machine learning", "racecar", "banana bread",
           "stressed desserts", "the quick brown fox", "level up", "python is fun")
TICKERS = ("AAPL", "MSFT", "GOOGL", "AMZN", "TSLA", "NVDA", "META", "IBM")
LANGUAGES = ("French", "Spanish", "German", "Italian", "Japanese", "Portuguese")
FRUITS = ("apple", "banana", "cherry", "grape", "kiwi", "mango", "pear", "plum")
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank")
DATES = tuple(f"2025-{m:02d}-{d:02d}" for m in (1, 3, 6, 9, 11) for d in (4, 12, 21, 28))
TIMES = ("09:00", "10:30", "13:15", "15:45", "18:00")
LENGTHS = ("meters", "feet", "kilometers", "miles", "inches", "centimeters")


def _weather() -> Schema:
    return Schema(
        "get_weather", "Gets the current weather for a city.",
        {"city": Param("str", "Name of the city.", pick(*CITIES)),
         "units": Param("str", "Temperature units, 'celsius' or 'fahrenheit'.", pick("celsius", "fahrenheit"),
                        optional=True, default="celsius")},
        {(): ("What's the weather like in {city}?", "Is it raining in {city} right now?",
              "Tell me the current weather in {city}.", "how's the weather in {city} today"),
         ("units",): ("What's the weather in {city}, in {units}?", "Give me the temperature in {city} using {units}.")},
        multi_arg="city",
        multi_templates=("What's the weather in {city}?", "Compare the current weather in {city}."))


SCHEMAS: tuple[Schema, ...] = (
    _weather(),
    Schema(
        "convert_units", "Converts a length from one unit to another.",
        {"value": Param("float", "The amount to convert.", floats(1, 500, 1)),
         "from_unit": Param("str", "The unit to convert from.", pick(*LENGTHS[:3])),
         "to_unit": Param("str", "The unit to convert to.", pick(*LENGTHS[3:]))},
        {(): ("Convert {value} {from_unit} to {to_unit}.", "How many {to_unit} is {value} {from_unit}?",
              "I have {value} {from_unit}; what is that in {to_unit}?")}),
    Schema(
        "calculate_factorial", "Calculates the factorial of a non-negative integer.",
        {"n": Param("int", "The non-negative integer.", ints(0, 20))},
        {(): ("What is the factorial of {n}?", "Compute {n}!", "Calculate the factorial of {n} for me.",
              "I need the factorial of the number {n}.")},
        multi_arg="n",
        multi_templates=("What are the factorials of {n}?", "Compute the factorial of each of {n}.",
                         "Give me the factorials for {n}.")),
    Schema(
        "reverse_string", "Reverses the characters of a string.",
        {"text": Param("str", "The string to reverse.", pick(*PHRASES))},
        {(): ('Reverse the string "{text}".', 'What is "{text}" spelled backwards?',
              'Can you flip the characters in "{text}"?')}),
    Schema(
        "reverse_words", "Reverses the order of words in a sentence.",
        {"sentence": Param("str", "The input sentence.", pick(*PHRASES))},
        {(): ('Reverse the word order of "{sentence}".', 'Put the words of "{sentence}" in reverse order.',
              'What does "{sentence}" look like with its words reversed?')}),
    Schema(
        "sort_list", "Sorts a list of integers.",
        {"numbers": Param("list[int]", "The integers to sort.", int_lists(-50, 100)),
         "descending": Param("bool", "Sort from largest to smallest.", flag(), optional=True, default=False,
                             phrases=("ascending", "descending"))},
        {(): ("Sort these numbers: {numbers}.", "Can you put {numbers} in order?", "Please sort {numbers}."),
         ("descending",): ("Sort {numbers} in {descending} order.", "Arrange {numbers} in {descending} order.")}),
    Schema(
        "get_range", "Finds the difference between the largest and smallest number in a list.",
        {"numbers": Param("list[int]", "The list of integers.", int_lists(0, 1000))},
        {(): ("What is the range of {numbers}?", "How far apart are the biggest and smallest of {numbers}?",
              "Find the spread between the max and min of {numbers}.")}),
    Schema(
        "convert_currency", "Converts an amount of money between currencies.",
        {"amount": Param("float", "The amount of money.", floats(1, 5000)),
         "from_currency": Param("str", "Three-letter code of the source currency.", pick(*CURRENCIES[:4])),
         "to_currency": Param("str", "Three-letter code of the target currency.", pick(*CURRENCIES[4:]))},
        {(): ("Convert {amount} {from_currency} to {to_currency}.", "How much is {amount} {from_currency} in {to_currency}?",
              "I want to exchange {amount} {from_currency} into {to_currency}. How much will I get?")}),
    Schema(
        "send_email", "Sends an email.",
        {"to": Param("str", "Recipient email address.", lambda r: f"{r.choice(NAMES)}@example.com"),
         "subject": Param("str", "Subject line.", pick("Meeting", "Invoice", "Lunch plans", "Project update")),
         "body": Param("str", "Body text.", pick("See you at noon", "Please review the draft", "Thanks for your help")),
         "urgent": Param("bool", "Mark the email as urgent.", flag(), optional=True, default=False,
                         phrases=("a non-urgent", "an urgent"))},
        {(): ('Email {to} with the subject "{subject}" saying "{body}".',
              'Send a message to {to}: subject "{subject}", body "{body}".'),
         ("urgent",): ('Send {urgent} email to {to} with subject "{subject}" and body "{body}".',)}),
    Schema(
        "create_calendar_event", "Creates an event in the user's calendar.",
        {"title": Param("str", "Event title.", pick("Dentist", "Team sync", "Birthday party", "Gym")),
         "date": Param("str", "Date as YYYY-MM-DD.", pick(*DATES)),
         "time": Param("str", "Start time as HH:MM.", pick(*TIMES)),
         "duration_minutes": Param("int", "Length of the event in minutes.", pick(15, 30, 45, 60, 90),
                                   optional=True, default=60)},
        {(): ('Add "{title}" to my calendar on {date} at {time}.', 'Schedule "{title}" for {date}, {time}.'),
         ("duration_minutes",): ('Book "{title}" on {date} at {time} for {duration_minutes} minutes.',
                                 'Put a {duration_minutes}-minute "{title}" in my calendar on {date} at {time}.')}),
    Schema(
        "get_stock_price", "Gets the latest price of a stock.",
        {"symbol": Param("str", "Ticker symbol.", pick(*TICKERS)),
         "exchange": Param("str", "Stock exchange.", pick("NASDAQ", "NYSE"), optional=True)},
        {(): ("What's the current price of {symbol}?", "How is {symbol} trading right now?", "Get me a quote for {symbol}."),
         ("exchange",): ("What's {symbol} trading at on the {exchange}?",)},
        multi_arg="symbol",
        multi_templates=("What are the stock prices of {symbol}?", "Get quotes for {symbol}.")),
    Schema(
        "translate_text", "Translates text into another language.",
        {"text": Param("str", "Text to translate.", pick("good morning", "thank you very much", "where is the station")),
         "target_language": Param("str", "Language to translate into.", pick(*LANGUAGES)),
         "source_language": Param("str", "Language of the text.", pick("English"), optional=True, default="auto")},
        {(): ('Translate "{text}" into {target_language}.', 'How do you say "{text}" in {target_language}?'),
         ("source_language",): ('Translate the {source_language} phrase "{text}" to {target_language}.',)}),
    Schema(
        "calculate_distance", "Calculates the travel distance between two cities.",
        {"origin": Param("str", "Starting city.", pick(*CITIES[:6])),
         "destination": Param("str", "Destination city.", pick(*CITIES[6:])),
         "units": Param("str", "'km' or 'miles'.", pick("km", "miles"), optional=True, default="km")},
        {(): ("How far is it from {origin} to {destination}?", "What's the distance between {origin} and {destination}?"),
         ("units",): ("How many {units} from {origin} to {destination}?",)}),
    Schema(
        "calculate_bmi", "Calculates body mass index.",
        {"weight_kg": Param("float", "Weight in kilograms.", floats(45, 120, 1)),
         "height_m": Param("float", "Height in meters.", floats(1.5, 2.0, 2))},
        {(): ("What's the BMI of someone who weighs {weight_kg} kg and is {height_m} m tall?",
              "I'm {height_m} m and {weight_kg} kg. What is my BMI?", "Compute BMI for {weight_kg} kg, {height_m} m.")}),
    Schema(
        "set_timer", "Starts a countdown timer.",
        {"minutes": Param("int", "Duration in minutes.", ints(1, 90)),
         "label": Param("str", "Name for the timer.", pick("pasta", "laundry", "break", "tea"), optional=True)},
        {(): ("Set a timer for {minutes} minutes.", "Start a {minutes} minute countdown.", "Remind me in {minutes} minutes."),
         ("label",): ("Set a {minutes} minute timer called {label}.", "Start a timer named {label} for {minutes} minutes.")}),
    Schema(
        "search_web", "Searches the web and returns result snippets.",
        {"query": Param("str", "The search query.", pick("best hiking trails", "python tutorials", "cheap flights", "vegan recipes")),
         "max_results": Param("int", "Maximum number of results.", pick(3, 5, 10), optional=True, default=5)},
        {(): ('Search the web for "{query}".', 'Look up "{query}" online.', 'Find me some results about "{query}".'),
         ("max_results",): ('Search for "{query}" and show {max_results} results.', 'Give me the top {max_results} hits for "{query}".')}),
    Schema(
        "is_prime", "Checks whether an integer is prime.",
        {"n": Param("int", "The integer to test.", ints(2, 500))},
        {(): ("Is {n} a prime number?", "Check if {n} is prime.", "Tell me whether {n} is prime.")},
        multi_arg="n",
        multi_templates=("Which of {n} are prime?", "Check whether each of {n} is prime.")),
    Schema(
        "count_vowels", "Counts the vowels in a string.",
        {"text": Param("str", "The string to examine.", pick(*PHRASES))},
        {(): ('How many vowels are in "{text}"?', 'Count the vowels in "{text}".')}),
    Schema(
        "calculate_tip", "Calculates the tip for a restaurant bill.",
        {"bill_amount": Param("float", "Total of the bill.", floats(10, 300)),
         "tip_percent": Param("float", "Tip percentage.", pick(10, 12.5, 18, 20, 22), optional=True, default=15)},
        {(): ("What's the tip on a {bill_amount} bill?", "How much should I tip on {bill_amount}?"),
         ("tip_percent",): ("What's the tip at {tip_percent}% on {bill_amount}?", "Calculate a tip of {tip_percent} percent for a {bill_amount} bill.")}),
    Schema(
        "get_news_headlines", "Gets the latest news headlines on a topic.",
        {"topic": Param("str", "News topic.", pick("technology", "sports", "science", "politics", "health")),
         "count": Param("int", "Number of headlines.", ints(2, 10), optional=True, default=5)},
        {(): ("What's new in {topic}?", "Show me the latest {topic} headlines.", "Any {topic} news today?"),
         ("count",): ("Give me {count} {topic} headlines.", "List the top {count} stories about {topic}.")}),
    Schema(
        "find_restaurants", "Finds restaurants in a city.",
        {"city": Param("str", "City to search in.", pick(*CITIES)),
         "cuisine": Param("str", "Type of food.", pick("Italian", "Thai", "Mexican", "Indian", "sushi")),
         "open_now": Param("bool", "Only restaurants open now.", lambda r: True, optional=True, default=False,
                           phrases=("open at any hour", "open now"))},
        {(): ("Find {cuisine} restaurants in {city}.", "Where can I eat {cuisine} food in {city}?"),
         ("open_now",): ("Which {cuisine} places in {city} are {open_now}?",)}),
    Schema(
        "find_common_elements", "Returns the items two lists have in common.",
        {"list_a": Param("list[str]", "First list.", str_lists(FRUITS)),
         "list_b": Param("list[str]", "Second list.", str_lists(FRUITS))},
        {(): ("What do the lists ({list_a}) and ({list_b}) have in common?",
              "Find the overlap between the first list ({list_a}) and the second list ({list_b}).")}),
    Schema(
        "remove_duplicates", "Removes repeated items from a list, keeping the first occurrence.",
        {"items": Param("list[str]", "The list of items.", lambda r: [r.choice(FRUITS[:4]) for _ in range(r.randint(3, 6))])},
        {(): ("Remove the duplicates from {items}.", "Deduplicate this list: {items}.")}),
    Schema(
        "fibonacci", "Returns the n-th Fibonacci number.",
        {"n": Param("int", "Position in the sequence (0-based).", ints(0, 60))},
        {(): ("What is Fibonacci number {n}?", "Give me Fibonacci number {n}.", "Compute the Fibonacci number at position {n}.")},
        multi_arg="n",
        multi_templates=("What are Fibonacci numbers {n}?", "Compute the Fibonacci numbers at positions {n}.")),
    Schema(
        "calculate_compound_interest", "Calculates the final balance with compound interest.",
        {"principal": Param("float", "Starting amount.", floats(100, 20000)),
         "rate": Param("float", "Annual interest rate in percent.", floats(0.5, 9, 1)),
         "years": Param("int", "Number of years.", ints(1, 40))},
        {(): ("If I invest {principal} at {rate}% for {years} years, what will I have?",
              "Compound interest on {principal} at {rate} percent over {years} years?")}),
    Schema(
        "play_music", "Plays a song.",
        {"song": Param("str", "Song title.", pick("Yesterday", "Imagine", "Clocks", "Hey Jude")),
         "shuffle": Param("bool", "Shuffle the queue afterwards.", flag(), optional=True, default=False,
                          phrases=("without shuffle", "with shuffle on"))},
        {(): ("Play {song}.", "Put on {song}, please.", "I want to hear {song}."),
         ("shuffle",): ("Play {song} {shuffle}.",)}),
)

BY_NAME: dict[str, Schema] = {s.name: s for s in SCHEMAS}
