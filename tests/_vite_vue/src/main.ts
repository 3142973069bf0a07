import { createApp } from "vue";
import ProfileForm from "./components/ProfileForm.vue";

createApp(ProfileForm).mount("#app");
