import { add } from '<CURSOR>';
