-- 0009: how each reviewed answer was drawn (`stef review sample --strategy`): 'random' or 'all'
-- labels estimate the judge's operating characteristics without bias; 'uncertain' and
-- 'stratified' over-represent some P(correct) values. NULL: not written by `stef review sample`.
ALTER TABLE reviews ADD COLUMN sample_strategy VARCHAR;
