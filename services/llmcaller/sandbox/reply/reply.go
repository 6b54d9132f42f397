// Package reply decides what Aptix's sandbox model answers, apart from any
// wire format: which tool it calls and with which arguments, or which
// text, in the shape the request asks for (plain text, a JSON object, a
// document of a JSON Schema). It is deterministic: the same request gets
// the same answer. The sandbox's Responses endpoint encodes these answers;
// another endpoint (Chat Completions) can reuse them as they are.
//
// Rules states the rules in words; the sandbox's help prints it and
// docs/sandbox.md describes it.
package reply

// Rules describes the sandbox's answering rules, in the order they apply.
const Rules = `How the sandbox answers (in order; the first rule that applies wins):
  1. [call:NAME {json}] markers in the user's latest message (outside [CONTEXT] parts) are
     function calls with exactly those arguments, one per marker (parallel_tool_calls false:
     the first), until each call's function_call_output comes back; [repeat:NAME {json}]
     calls again on every round. tool_choice "none" turns markers off.
  2. tool_choice "required" or {"type":"function","name":N} always calls: the named tool, or
     for "required" the best-matching tool (rule 3), else the first function tool.
  3. tool_choice "auto" (the default) with function tools: when the user's request shares a
     word with a tool's name (or two with its description; common words like "get", "the",
     "what" do not count), the best-matching tool is called, the first on a tie, unless a
     function_call_output already came back after the user's latest message (then it answers
     in text, quoting each output). "What's the weather like in San Francisco?" calls
     get_weather.
  4. Arguments (rules 2-3) are built from the tool's parameters schema: every required
     property, in declared order, with a value the request names where it names one:
     a place (a capitalised phrase, preferably after in/at/to/from/near, e.g. "San Francisco")
     for a property whose name or description says city, location, place, country, address,
     region, town, destination or where; the request's first line for a property named like
     query, search, question, prompt, text, message, keyword, topic, input, request or q; a
     number of the text, in order and within minimum/maximum, for a number or integer; an
     enum value the text mentions; a value of a format it can spot (email, uri, url, date,
     date-time, uuid); a "quoted" string for any other string. Optional properties are added
     only for an enum value, a format value or a place the text names. Otherwise the value
     comes from the schema: const, default, example(s), the first enum value, the first
     non-null anyOf/oneOf branch, allOf merged, local $ref ($defs, definitions) followed,
     objects with their required properties, arrays with minItems items (one when allowed;
     distinct for uniqueItems), numbers within minimum/maximum/exclusive*/multipleOf, strings
     within minLength/maxLength (and a pattern when one of a few simple candidates matches).
  5. text.format json_schema: the text is a JSON document built from the schema as in rule 4
     (so it validates against it); json_object: {"sandbox":true,"reply":"<the sentence>"}.
  6. Otherwise the text is the sentence "Sandbox reply (mode M) to: <the instruction's first
     line>. Context chunks: <ids or none>.", then "Continuing from <id>." on a continuation,
     the number of images and files attached, the compacted history, and each tool output
     ("Tool NAME (CALL_ID) returned \"OUTPUT\".").
  --script replaces the text of rules 5-6 with its entries, one per request, in order.`
