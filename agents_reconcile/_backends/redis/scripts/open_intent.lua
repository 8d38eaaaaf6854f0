-- open_intent(): record an intent and count it as a write of its session, only while its
-- session and backend have no other unresolved intent and, when ARGV[10] is not empty, the
-- session's count is still that number. ARGV[1..9] as for record(). ARGV[11], when not
-- empty, is an acknowledged intent cleared first (as discard() does, counting a write), only
-- while it is in flight under this owner in this session and backend. Replies, with the
-- session's count as found second (after the clearing):
--   {'recorded', write_count}               recorded now (write_count: the count before it)
--   {'held', write_count, seq, row}         the id is already this session's unresolved intent;
--                                      seq is the count stored when it was opened ('' if
--                                      none), row as entries.lua gives it
--   {'blocked', write_count, rows}          other unresolved intents, oldest first
--   {'stale', write_count}                  the count is not the one expected
--   {'settled'} or {'taken'}           as for record()
-- With ARGV[12] '1' (a journal on a Redis Cluster asks), each reply has one more element last:
-- 1 when the intent of ARGV[11] was cleared, else 0.
local opening, answer = try_open()
if opening then
  finish_open(opening, not answer)
  if not answer then
    answer = {'recorded', string.format('%d', opening.count)}
  end
end
if ARGV[12] == '1' and not answer.err then
  answer[#answer + 1] = cleared and 1 or 0
end
return answer
