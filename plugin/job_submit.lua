--[[
slurm_sched job_submit plugin (Slurm JobSubmitPlugins=lua).

For jobs in the partitions managed by the slurm_sched external scheduler it
  1. validates the job hints in `--comment` (schema v1, see docs/hints.md) and
     rejects a bad hint at submit time with a one-line message that sbatch prints;
  2. gives the job a LEASE: its begin time is set LEASE_S seconds ahead, so that
     Slurm's own scheduler does not start it before then. The running scheduler
     daemon renews the lease of every job it has not started yet, and starts a
     job by pinning its nodes together with `StartTime=now`. If the daemon stops,
     the leases run out and Slurm schedules the jobs itself (fail-open: no job
     waits forever for a scheduler that is gone);
  3. refuses every change to a managed job (update, StartTime/begin time, hold,
     release, moving it between partitions) unless it comes from an admin uid
     (the scheduler), so that owners cannot jump the queue.
Jobs in other partitions are not touched.

The hint rules are the same as slurm_sched/protocol/hints.py (checked by
tests/unit/test_hints.py). Slurm 22.05 embeds Lua 5.1 and lua-cjson may be
missing, so this file carries its own small RFC 8259 JSON parser; it also runs
on Lua 5.3. Nothing outside this file is required.
--]]

-- Site settings. cluster.sh rewrites these lines for the test cluster; admins
-- edit them by hand. Comma-separated lists, no spaces.
local MANAGED_PARTITIONS = "sched" -- partitions whose jobs the scheduler runs
local DEFAULT_PARTITION = "sched" -- slurm.conf's Default=YES partition (jobs without -p)
local ADMIN_UIDS = "0" -- uids allowed to modify managed jobs (root, the scheduler's user)
local LEASE_S = 120 -- seconds before Slurm may start a managed job on its own (fail-open lease)

local MAX_COMMENT_BYTES = 1024
local SCHEMA_VERSION = 1

----------------------------------------------------------------------------
-- Minimal JSON parser. Values are tagged tables that keep the raw text:
--   {t="obj", keys={k1,...} (document order), map={k=node}}
--   {t="arr", items={node,...}}   {t="str", v=string}   {t="bool", v=bool}
--   {t="num", v=number, int=true when written without fraction/exponent}
--   {t="null"}
-- Errors are raised as tables: {json=message} or {field=, value=, msg=}.
----------------------------------------------------------------------------

local function fail(msg, pos)
  error({ json = msg .. " at byte " .. pos }, 0)
end

local function skip_ws(s, i)
  local _, e = string.find(s, "^[ \t\r\n]*", i)
  return e + 1
end

local function utf8_char(cp)
  if cp < 0x80 then
    return string.char(cp)
  elseif cp < 0x800 then
    return string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40)
  elseif cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40,
      0x80 + cp % 0x40)
  end
  return string.char(0xF0 + math.floor(cp / 0x40000), 0x80 + math.floor(cp / 0x1000) % 0x40,
    0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local ESCAPES = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n",
  r = "\r", t = "\t" }

local function parse_string(s, i) -- s:sub(i, i) == '"'
  local parts = {}
  local j = i + 1
  while true do
    local c = string.sub(s, j, j)
    if c == "" then
      fail("unterminated string", i)
    elseif c == '"' then
      return table.concat(parts), j + 1
    elseif c == "\\" then
      local e = string.sub(s, j + 1, j + 1)
      if ESCAPES[e] then
        parts[#parts + 1] = ESCAPES[e]
        j = j + 2
      elseif e == "u" then
        local hex = string.sub(s, j + 2, j + 5)
        if not string.find(hex, "^[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]$") then
          fail("invalid \\u escape", j)
        end
        local cp = tonumber(hex, 16)
        j = j + 6
        if cp >= 0xD800 and cp <= 0xDBFF
            and string.find(s, "^\\u[dD][c-fC-F][0-9a-fA-F][0-9a-fA-F]", j) then
          local lo = tonumber(string.sub(s, j + 2, j + 5), 16)
          cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
          j = j + 6
        end
        parts[#parts + 1] = utf8_char(cp)
      else
        fail("invalid escape", j)
      end
    elseif string.byte(c) < 32 then
      fail("control character in string", j)
    else
      parts[#parts + 1] = c
      j = j + 1
    end
  end
end

local function parse_number(s, i)
  local _, e = string.find(s, "^%-?", i)
  local j = e + 1
  if string.sub(s, j, j) == "0" then
    j = j + 1
  else
    _, e = string.find(s, "^[1-9][0-9]*", j)
    if not e then fail("invalid number", i) end
    j = e + 1
  end
  local is_int = true
  if string.sub(s, j, j) == "." then
    _, e = string.find(s, "^[0-9]+", j + 1)
    if not e then fail("invalid number", i) end
    j = e + 1
    is_int = false
  end
  if string.find(s, "^[eE]", j) then
    _, e = string.find(s, "^[+-]?[0-9]+", j + 1)
    if not e then fail("invalid number", i) end
    j = e + 1
    is_int = false
  end
  local raw = string.sub(s, i, j - 1)
  return { t = "num", v = tonumber(raw), int = is_int, raw = raw }, j
end

local parse_value

local function parse_array(s, i) -- s:sub(i, i) == "["
  local items = {}
  local j = skip_ws(s, i + 1)
  if string.sub(s, j, j) == "]" then
    return { t = "arr", items = items, raw = string.sub(s, i, j) }, j + 1
  end
  while true do
    local item
    item, j = parse_value(s, j)
    items[#items + 1] = item
    j = skip_ws(s, j)
    local c = string.sub(s, j, j)
    if c == "]" then
      return { t = "arr", items = items, raw = string.sub(s, i, j) }, j + 1
    elseif c ~= "," then
      fail("expected ',' or ']'", j)
    end
    j = skip_ws(s, j + 1)
  end
end

local function parse_object(s, i) -- s:sub(i, i) == "{"
  local keys, vals = {}, {}
  local j = skip_ws(s, i + 1)
  if string.sub(s, j, j) ~= "}" then
    while true do
      if string.sub(s, j, j) ~= '"' then fail("expected a string key", j) end
      local key, val
      key, j = parse_string(s, j)
      j = skip_ws(s, j)
      if string.sub(s, j, j) ~= ":" then fail("expected ':'", j) end
      val, j = parse_value(s, skip_ws(s, j + 1))
      keys[#keys + 1] = key
      vals[#vals + 1] = val
      j = skip_ws(s, j)
      local c = string.sub(s, j, j)
      if c == "}" then break end
      if c ~= "," then fail("expected ',' or '}'", j) end
      j = skip_ws(s, j + 1)
    end
  end
  -- duplicates are reported once the object is complete (as Python's object_pairs_hook)
  local map = {}
  for n, key in ipairs(keys) do
    if map[key] ~= nil then
      error({ field = key, value = vals[n].raw, msg = "duplicate key" }, 0)
    end
    map[key] = vals[n]
  end
  return { t = "obj", keys = keys, map = map, raw = string.sub(s, i, j) }, j + 1
end

local LITERALS = { { "true", "bool", true }, { "false", "bool", false }, { "null", "null" } }

parse_value = function(s, i)
  local c = string.sub(s, i, i)
  if c == "{" then
    return parse_object(s, i)
  elseif c == "[" then
    return parse_array(s, i)
  elseif c == '"' then
    local str, j = parse_string(s, i)
    return { t = "str", v = str, raw = string.sub(s, i, j - 1) }, j
  elseif c == "-" or string.find(c, "^[0-9]$") then
    return parse_number(s, i)
  end
  for _, lit in ipairs(LITERALS) do
    if string.sub(s, i, i + #lit[1] - 1) == lit[1] then
      return { t = lit[2], v = lit[3], raw = lit[1] }, i + #lit[1]
    end
  end
  if c == "" then fail("unexpected end of input", i) end
  fail("unexpected character", i)
end

local function parse_json(s)
  local value, j = parse_value(s, skip_ws(s, 1))
  j = skip_ws(s, j)
  if j <= #s then fail("extra data", j) end
  return value
end

----------------------------------------------------------------------------
-- Hint schema v1: the same fields, order and bounds as JobHints in hints.py.
----------------------------------------------------------------------------

local MODEL_RE = "^[A-Za-z0-9][A-Za-z0-9._:/+%-]*$"
local PLAN_RE = "^[a-z0-9][a-z0-9%-]*$"
local STAGE_TIME = { kind = "float", gt = 0, le = 1e7 }
local PLAN_CODE = { kind = "str", re = PLAN_RE, re_text = "^[a-z0-9][a-z0-9-]*$", max_len = 16 }

local FIELDS = {
  { name = "model", kind = "str", re = MODEL_RE, re_text = "^[A-Za-z0-9][A-Za-z0-9._:/+-]*$",
    max_len = 64 },
  { name = "batch_size", kind = "int", ge = 1, le = 1e9 },
  { name = "iterations", kind = "int", ge = 1, le = 1e12 },
  { name = "duration_s", kind = "float", gt = 0, le = 1e9 },
  { name = "stage_times_ms", kind = "list", item = STAGE_TIME, min_items = 1, max_items = 8 },
  { name = "plans", kind = "list", item = PLAN_CODE, min_items = 1, max_items = 16 },
  { name = "tickets", kind = "float", gt = 0, le = 1e6 },
  { name = "guaranteed", kind = "bool" },
}

local KNOWN = { v = true }
local KNOWN_LIST = { "v" }
for _, f in ipairs(FIELDS) do
  KNOWN[f.name] = true
  KNOWN_LIST[#KNOWN_LIST + 1] = f.name
end

local function fmt_num(x)
  if x == math.floor(x) and math.abs(x) < 1e15 then return string.format("%.0f", x) end
  return tostring(x)
end

-- returns nil when the node satisfies spec, else a message
local function check_value(node, spec)
  local kind = spec.kind
  if kind == "bool" then
    if node.t ~= "bool" then return "must be true or false" end
  elseif kind == "str" then
    if node.t ~= "str" then return "must be a string" end
    if not string.find(node.v, spec.re) then return "must match " .. spec.re_text end
    if #node.v > spec.max_len then
      return "must be at most " .. spec.max_len .. " characters"
    end
  elseif kind == "int" or kind == "float" then
    if node.t ~= "num" then
      return kind == "int" and "must be an integer" or "must be a number"
    end
    if kind == "int" and not node.int then return "must be an integer" end
    local x = node.v
    if x ~= x or x == math.huge or x == -math.huge then
      -- an integer literal too large for a double, or 1e400
      if node.int then
        if kind == "int" then return "must be <= " .. fmt_num(spec.le) end
        return "is out of range"
      end
      return "must be finite"
    end
    if spec.ge and x < spec.ge then return "must be >= " .. fmt_num(spec.ge) end
    if spec.gt and not (x > spec.gt) then return "must be > " .. fmt_num(spec.gt) end
    if spec.le and x > spec.le then return "must be <= " .. fmt_num(spec.le) end
  elseif kind == "list" then
    if node.t ~= "arr" then return "must be a list" end
    local n = #node.items
    if n < spec.min_items then
      return "must have at least " .. spec.min_items .. " item(s)"
    end
    if n > spec.max_items then return "must have at most " .. spec.max_items .. " items" end
    for idx, item in ipairs(node.items) do
      local msg = check_value(item, spec.item)
      if msg then return "item " .. (idx - 1) .. " " .. msg end
    end
  end
  return nil
end

local function show(raw) -- a value's JSON text, on one line and short
  raw = string.gsub(raw, "[\t\r\n]+", " ")
  if #raw > 60 then return string.sub(raw, 1, 57) .. "..." end
  return raw
end

local function escape_controls(s) -- keeps messages on one line
  return (string.gsub(s, ".", function(c)
    local b = string.byte(c)
    if b < 32 or b == 127 then return string.format("\\u%04x", b) end
  end))
end

local function hint_error(field, raw, msg)
  if field == nil then return false, nil, "hint: " .. msg end
  return false, field, "hint '" .. escape_controls(field) .. "' = " .. show(raw) .. ": " .. msg
end

-- Validate a job comment. Returns true, or false, field (nil when the error is
-- not about one field) and a one-line message such as
--   hint 'batch_size' = -3: must be >= 1
-- Global so that tests can call it from a plain lua interpreter.
function slurm_sched_check_hints(comment)
  if comment == nil then return true end
  if #comment > MAX_COMMENT_BYTES then
    return hint_error(nil, nil,
      "comment is " .. #comment .. " bytes, the limit is " .. MAX_COMMENT_BYTES)
  end
  if string.find(comment, "^[ \t\r\n]*$") then return true end
  local ok, doc = pcall(parse_json, comment)
  if not ok then
    if type(doc) == "table" and doc.json then
      return hint_error(nil, nil, "not valid JSON (" .. doc.json .. ")")
    elseif type(doc) == "table" and doc.field then
      return hint_error(doc.field, doc.value, doc.msg)
    end
    return hint_error(nil, nil, "not valid JSON (" .. tostring(doc) .. ")")
  end
  if doc.t ~= "obj" then return hint_error(nil, nil, "must be a JSON object") end
  local v = doc.map.v
  if v ~= nil and not (v.t == "num" and v.int and v.v == SCHEMA_VERSION) then
    return hint_error("v", v.raw,
      "unsupported schema version (this scheduler reads v " .. SCHEMA_VERSION .. ")")
  end
  for _, key in ipairs(doc.keys) do
    if not KNOWN[key] then
      return hint_error(key, doc.map[key].raw,
        "unknown hint (known: " .. table.concat(KNOWN_LIST, ", ") .. ")")
    end
  end
  for _, spec in ipairs(FIELDS) do
    local node = doc.map[spec.name]
    if node ~= nil and node.t ~= "null" then
      local msg = check_value(node, spec)
      if msg then return hint_error(spec.name, node.raw, msg) end
    end
  end
  return true
end

----------------------------------------------------------------------------
-- Slurm hooks
----------------------------------------------------------------------------

local function csv_set(csv, as_number)
  local set = {}
  for item in string.gmatch(csv, "[^,%s]+") do
    if as_number then item = tonumber(item) end
    if item ~= nil then set[item] = true end
  end
  return set
end

-- The begin time a managed job gets at submit (global so that tests can call it).
function slurm_sched_lease_end(now)
  return now + LEASE_S
end

local MANAGED = csv_set(MANAGED_PARTITIONS, false)
local ADMINS = csv_set(ADMIN_UIDS, true)

-- a job asking for several partitions (-p a,b) is managed if any of them is
local function is_managed(partition)
  if partition == nil or partition == "" then partition = DEFAULT_PARTITION end
  for p in string.gmatch(partition, "[^,]+") do
    if MANAGED[p] then return true end
  end
  return false
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not is_managed(job_desc.partition) then return slurm.SUCCESS end
  local ok, _, msg = slurm_sched_check_hints(job_desc.comment)
  if not ok then
    slurm.log_info("slurm_sched: rejected job from uid %s: %s", tostring(submit_uid), msg)
    slurm.log_user("%s", "slurm_sched: " .. msg)
    return slurm.ERROR
  end
  -- not held: begin time LEASE_S ahead (Reason=BeginTime). The scheduler renews it while
  -- it runs; a `--begin` of the user is replaced (the scheduler decides when jobs start).
  job_desc.begin_time = slurm_sched_lease_end(os.time())
  -- a submit-time hold (`sbatch --hold`, priority 0) would keep the job from Slurm for ever
  -- once the scheduler is gone, and the owner could not release it: dropped
  if job_desc.priority == 0 then
    slurm.log_info("slurm_sched: dropped the submit hold of a job from uid %s", tostring(submit_uid))
    job_desc.priority = slurm.NO_VAL
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if ADMINS[modify_uid] then return slurm.SUCCESS end
  if is_managed(job_rec.partition)
      or (job_desc.partition ~= nil and is_managed(job_desc.partition)) then
    -- Slurm 22.05 does not pass log_user text of job_modify back to the client.
    slurm.log_user("%s", "slurm_sched: jobs in partition(s) " .. MANAGED_PARTITIONS
      .. " are managed by the external scheduler; only scancel is allowed")
    slurm.log_info("slurm_sched: refused a change to job %s by uid %s",
      tostring(job_rec.job_id), tostring(modify_uid))
    return slurm.ERROR
  end
  return slurm.SUCCESS
end

slurm.log_info("slurm_sched: job_submit.lua loaded (managed partitions: %s, lease %d s)",
  MANAGED_PARTITIONS, LEASE_S)
